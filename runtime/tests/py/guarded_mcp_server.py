"""An MCP server (the official Python SDK 2.x) that only takes callers with a valid token of one
issuer for its own audience, checked with joserfc against the issuer's JWKS: what a real
downstream server behind OAuth does. Refused requests get 401 with a Bearer challenge.

Usage: guarded_mcp_server.py ISSUER AUDIENCE. Listens on 127.0.0.1 (a free port) at /mcp and
prints "LISTENING <port>"; then one JSON line per request it refused ({"refused": reason}).

Tool whoami(): the verified token's `sub`, `aud`, `act` (who exchanged it) and `scope`, as
JSON: the caller as this server sees it.
"""

import asyncio
import json
import sys
import time
import urllib.request
import warnings

import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet

from mcp.server.mcpserver import Context, MCPServer

warnings.filterwarnings("ignore", message=".*EdDSA.*")

ISSUER = sys.argv[1]
AUDIENCE = sys.argv[2]
ALGORITHMS = ["RS256", "ES256", "EdDSA"]

server = MCPServer("guarded", version="1.0.0")
_keys = {"set": None, "at": 0.0}


def keys(refresh=False):
    if refresh or _keys["set"] is None or time.time() - _keys["at"] > 60:
        with urllib.request.urlopen(f"{ISSUER}/jwks", timeout=5) as answer:
            _keys["set"] = KeySet.import_key_set(json.load(answer))
            _keys["at"] = time.time()
    return _keys["set"]


def verify(authorization):
    if not authorization.lower().startswith("bearer "):
        raise ValueError("no bearer token")
    token = authorization[7:].strip()
    try:
        claims = jwt.decode(token, keys(), algorithms=ALGORITHMS).claims
    except Exception:
        claims = jwt.decode(token, keys(refresh=True), algorithms=ALGORITHMS).claims
    if claims.get("iss") != ISSUER:
        raise ValueError("another issuer")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if AUDIENCE not in audiences:
        raise ValueError(f"audience {audience!r}, not {AUDIENCE!r}")
    if claims.get("exp", 0) < time.time():
        raise ValueError("expired")
    return claims


@server.tool()
def whoami(ctx: Context) -> str:
    """Who the caller is, as this server's token check sees it."""
    request = ctx.request_context.request
    claims = verify(request.headers.get("authorization", ""))
    return json.dumps(
        {
            "sub": claims.get("sub"),
            "aud": claims.get("aud"),
            "act": (claims.get("act") or {}).get("sub"),
            "scope": claims.get("scope"),
        }
    )


class Guard:
    """Refuses any request without a valid token for this server's audience."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            await asyncio.to_thread(verify, headers.get("authorization", ""))
        except Exception as e:
            print(json.dumps({"refused": str(e)}), flush=True)
            body = b'{"error":"invalid_token"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer error="invalid_token"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        return await self.app(scope, receive, send)


class Announcing(uvicorn.Server):
    async def startup(self, sockets=None):
        await super().startup(sockets=sockets)
        port = self.servers[0].sockets[0].getsockname()[1]
        print(f"LISTENING {port}", flush=True)


def main():
    app = Guard(server.streamable_http_app(streamable_http_path="/mcp"))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    asyncio.run(Announcing(config).serve())


if __name__ == "__main__":
    main()
