"""Signs a test agent card with the official A2A SDK (a2a-sdk 1.3.0,
`a2a.utils.signing.create_agent_card_signer`), with each algorithm it offers for our keys,
and with an HMAC secret (which a verifier of cards must refuse).

Usage: card_sign.py KEY_DIR
Prints one JSON line per algorithm: {"step": alg, "kid": ..., "card": <the signed card's JSON>}.
"""

import json
import sys

from google.protobuf.json_format import MessageToDict, ParseDict

from a2a.types import AgentCard
from a2a.utils.signing import create_agent_card_signer

CARD = {
    "name": "SDK Signed Agent",
    "description": "Réponses signées — 署名 😂",
    "version": "1.0.0",
    "supportedInterfaces": [
        {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
    "capabilities": {
        "streaming": True,
        "extensions": [
            {"uri": "urn:x", "params": {"ratio": 1.5, "whole": 2.0, "big": 1e21, "tiny": 1e-7, "ö": "\u00e9", "nested": {"z": [1, "a"], "a": None}}}
        ],
    },
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "echo", "name": "Echo", "description": "Echoes", "tags": ["echo"]}],
}


def main():
    keys = sys.argv[1]
    for alg, kid, key in [
        ("ES256", "sdk-es256", open(f"{keys}/es256.pem", "rb").read()),
        ("EdDSA", "sdk-ed25519", open(f"{keys}/ed25519.pem", "rb").read()),
        ("RS256", "sdk-rs256", open(f"{keys}/rs256.pem", "rb").read()),
        ("HS256", "sdk-hmac", b"a shared secret that proves nothing to anyone else"),
    ]:
        card = ParseDict(CARD, AgentCard())
        signer = create_agent_card_signer(key, {"alg": alg, "kid": kid, "typ": "JOSE", "jku": None})
        signed = signer(card)
        print(json.dumps({"step": alg, "kid": kid, "card": MessageToDict(signed)}))


main()
