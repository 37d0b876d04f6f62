"""A small OpenID provider for the identity tests, its tokens signed by joserfc (an independent
JOSE implementation, not the runtime's): OIDC discovery, a JWKS with an RSA (RS256), an EC
P-256 (ES256) and an Ed25519 (EdDSA) key, and a token endpoint serving OAuth2 client
credentials and RFC 8693 token exchange.

Usage: oidc_provider.py <port>. Prints {"ready": true, "issuer": ...} once it serves.

Test-only admin routes (under /admin): mint a token with any claims, forge one (alg none,
HMAC keyed with the published public key), rotate the keys, register clients, pause the
provider (every public route answers 503 until resumed) and count the requests served. Nothing
it receives is logged: the tests grep every log line for tokens and secrets.
"""

import base64
import hashlib
import hmac
import json
import secrets
import sys
import threading
import time
import urllib.parse
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OKPKey, RSAKey

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ALGORITHMS = {"RS256": "rsa", "ES256": "ec", "EdDSA": "ed"}
# RFC 9864 deprecates the name EdDSA (for Ed25519); resource servers still see it everywhere.
warnings.filterwarnings("ignore", message=".*EdDSA.*")


class Provider:
    def __init__(self, issuer):
        self.issuer = issuer
        self.lock = threading.Lock()
        self.generation = 0
        self.keys = {}
        self.retired = []
        self.clients = {}
        self.paused = False
        self.counts = {"discovery": 0, "jwks": 0, "token": 0, "exchange": 0, "refused": 0}
        self.rotate(keep_previous=False)

    def rotate(self, keep_previous):
        with self.lock:
            if keep_previous:
                self.retired = list(self.keys.values())
            else:
                self.retired = []
            self.generation += 1
            g = self.generation
            self.keys = {
                "RS256": RSAKey.generate_key(2048, parameters={"kid": f"rsa-{g}", "alg": "RS256", "use": "sig"}),
                "ES256": ECKey.generate_key("P-256", parameters={"kid": f"ec-{g}", "alg": "ES256", "use": "sig"}),
                "EdDSA": OKPKey.generate_key("Ed25519", parameters={"kid": f"ed-{g}", "alg": "EdDSA", "use": "sig"}),
            }
            return {alg: key.kid for alg, key in self.keys.items()}

    def jwks(self):
        with self.lock:
            published = list(self.keys.values()) + self.retired
            return {"keys": [k.as_dict(private=False) for k in published]}

    def sign(self, claims, alg="RS256", kid=None):
        with self.lock:
            key = self.keys[alg]
        header = {"alg": alg, "kid": kid or key.kid, "typ": "JWT"}
        return jwt.encode(header, claims, key, algorithms=[alg])

    def verify(self, token):
        with self.lock:
            published = list(self.keys.values()) + self.retired
        token_obj = jwt.decode(token, KeySet(published), algorithms=list(ALGORITHMS))
        claims = token_obj.claims
        if claims.get("iss") != self.issuer or claims.get("exp", 0) < time.time():
            raise ValueError("not a live token of this issuer")
        return claims

    def forge(self, claims, how):
        def b64(data):
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        with self.lock:
            rsa = self.keys["RS256"]
        if how == "none":
            header = {"alg": "none", "kid": rsa.kid, "typ": "JWT"}
            return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}."
        if how == "hmac":
            # HS256 keyed with the RSA key as published: the classic algorithm confusion.
            header = {"alg": "HS256", "kid": rsa.kid, "typ": "JWT"}
            signing = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
            secret = json.dumps(rsa.as_dict(private=False), sort_keys=True).encode()
            mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
            return f"{signing}.{b64(mac)}"
        raise ValueError(how)

    def access_token(self, sub, audience, scope, ttl, extra=None):
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": sub,
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now + ttl,
            "jti": secrets.token_hex(8),
        }
        if scope:
            claims["scope"] = scope
        claims.update(extra or {})
        return self.sign(claims), ttl


class Handler(BaseHTTPRequestHandler):
    provider = None

    def log_message(self, *args):
        pass

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def refuse_if_paused(self):
        if self.provider.paused:
            self.send_json(503, {"error": "temporarily_unavailable"})
            return True
        return False

    def do_GET(self):
        p = self.provider
        path = urllib.parse.urlsplit(self.path).path
        if path == "/admin/stats":
            return self.send_json(200, dict(p.counts, generation=p.generation))
        if self.refuse_if_paused():
            return
        if path == "/.well-known/openid-configuration":
            p.counts["discovery"] += 1
            return self.send_json(200, {
                "issuer": p.issuer,
                "jwks_uri": f"{p.issuer}/jwks",
                "token_endpoint": f"{p.issuer}/token",
                "grant_types_supported": ["client_credentials", TOKEN_EXCHANGE],
                "id_token_signing_alg_values_supported": list(ALGORITHMS),
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            })
        if path == "/jwks":
            p.counts["jwks"] += 1
            return self.send_json(200, p.jwks())
        self.send_json(404, {"error": "not_found"})

    def do_POST(self):
        p = self.provider
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/admin/"):
            return self.admin(path[len("/admin/"):], json.loads(self.body() or b"{}"))
        if self.refuse_if_paused():
            return
        if path == "/token":
            return self.token()
        self.send_json(404, {"error": "not_found"})

    def client(self, form):
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("basic "):
            decoded = base64.b64decode(auth[6:]).decode()
            client_id, _, secret = decoded.partition(":")
            client_id = urllib.parse.unquote(client_id)
            secret = urllib.parse.unquote(secret)
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        registered = self.provider.clients.get(client_id)
        if registered is None or not hmac.compare_digest(registered["secret"], secret):
            return None, None
        return client_id, registered

    def token(self):
        p = self.provider
        form = {k: v[0] for k, v in urllib.parse.parse_qs(self.body().decode()).items()}
        client_id, client = self.client(form)
        if client is None:
            p.counts["refused"] += 1
            return self.send_json(401, {"error": "invalid_client"}, {"WWW-Authenticate": "Basic"})
        grant = form.get("grant_type")
        if grant == "client_credentials":
            p.counts["token"] += 1
            delay = client.get("delay", 0)
            if delay:
                time.sleep(delay)
            audience = form.get("audience") or client["audience"]
            scope = form.get("scope") or client.get("scope", "")
            token, ttl = p.access_token(client_id, audience, scope, client.get("ttl", 300))
            return self.send_json(200, {"access_token": token, "token_type": "Bearer", "expires_in": ttl})
        if grant == TOKEN_EXCHANGE:
            p.counts["exchange"] += 1
            try:
                subject = p.verify(form.get("subject_token", ""))
            except Exception:
                p.counts["refused"] += 1
                return self.send_json(400, {"error": "invalid_grant"})
            audience = form.get("audience") or form.get("resource")
            if not audience:
                return self.send_json(400, {"error": "invalid_request", "error_description": "audience is required"})
            extra = {"act": {"sub": client_id}}
            for claim in ("tenant",):
                if claim in subject:
                    extra[claim] = subject[claim]
            token, ttl = p.access_token(subject["sub"], audience, form.get("scope") or subject.get("scope", ""), client.get("ttl", 300), extra)
            return self.send_json(200, {
                "access_token": token,
                "issued_token_type": ACCESS_TOKEN_TYPE,
                "token_type": "Bearer",
                "expires_in": ttl,
            })
        return self.send_json(400, {"error": "unsupported_grant_type"})

    def admin(self, what, body):
        p = self.provider
        if what == "mint":
            claims = body["claims"]
            return self.send_json(200, {"token": p.sign(claims, body.get("alg", "RS256"), body.get("kid"))})
        if what == "forge":
            return self.send_json(200, {"token": p.forge(body["claims"], body["how"])})
        if what == "rotate":
            return self.send_json(200, {"kids": p.rotate(body.get("keep_previous", False))})
        if what == "client":
            p.clients[body["client_id"]] = body
            return self.send_json(200, {})
        if what == "pause":
            p.paused = True
            return self.send_json(200, {})
        if what == "resume":
            p.paused = False
            return self.send_json(200, {})
        return self.send_json(404, {"error": "not_found"})


def main():
    port = int(sys.argv[1])
    issuer = f"http://127.0.0.1:{port}"
    Handler.provider = Provider(issuer)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(json.dumps({"ready": True, "issuer": issuer}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
