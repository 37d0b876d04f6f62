"""Verifies a runtime's signed agent cards with the official A2A SDK (a2a-sdk 1.3.0,
`a2a.utils.signing.create_signature_verifier`), the way an SDK client would: the card read as
the SDK's AgentCard, its keys from the runtime's JWKS (`/.well-known/jwks.json`), or only the
key named by `--only-kid`.

Usage: card_verify.py BASE_URL [--bearer KEY] [--only-kid KID]
The extended forms are read with `Authorization: Bearer KEY` (served behind authentication).
Prints one JSON line per form of the card (`well-known`, `jsonrpc-extended`, `rest-extended`):
{"step": form, "verified": bool, "kids": [...], "error": ...}.
"""

import base64
import json
import sys
import urllib.request

from google.protobuf.json_format import ParseDict
from jwt.api_jwk import PyJWK
from jwt.exceptions import PyJWKError

from a2a.types import AgentCard
from a2a.utils.signing import create_signature_verifier


def header(protected):
    return json.loads(base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4)))


def get(url, body=None, bearer=None):
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers)) as r:
        return json.loads(r.read())


def main():
    base = sys.argv[1].rstrip("/")
    only = sys.argv[sys.argv.index("--only-kid") + 1] if "--only-kid" in sys.argv else None
    bearer = sys.argv[sys.argv.index("--bearer") + 1] if "--bearer" in sys.argv else None
    jwks = get(f"{base}/.well-known/jwks.json")
    keys = {k["kid"]: k for k in jwks["keys"] if only is None or k["kid"] == only}

    def key_provider(kid, jku):
        if kid not in keys:
            # A PyJWTError: the SDK's verifier goes on to the card's next signature.
            raise PyJWKError(f"unknown kid {kid}")
        return PyJWK(keys[kid])

    verify = create_signature_verifier(key_provider, ["ES256", "EdDSA", "RS256"])
    forms = {
        "well-known": get(f"{base}/.well-known/agent-card.json"),
        "jsonrpc-extended": get(
            f"{base}/",
            {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}},
            bearer,
        )["result"],
        "rest-extended": get(f"{base}/a2a/rest/extendedAgentCard", bearer=bearer),
    }
    for step, card_json in forms.items():
        card = ParseDict(card_json, AgentCard(), ignore_unknown_fields=True)
        kids = [header(s.protected).get("kid") for s in card.signatures]
        try:
            verify(card)
            print(json.dumps({"step": step, "verified": True, "kids": kids}))
        except Exception as e:  # noqa: BLE001 - the verdict is the output
            print(json.dumps({"step": step, "verified": False, "kids": kids, "error": repr(e)}))


main()
