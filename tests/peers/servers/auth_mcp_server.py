"""A Python MCP SDK (2.x) server that admits only requests bearing a valid OAuth access token.

Usage: auth_mcp_server.py PORT --jwks URL --issuer ISS --audience AUD [--store]

Every request to /mcp must carry `Authorization: Bearer <JWT>` signed by a key of the
authorization server's JWKS (fetched from URL with PyJWT's PyJWKClient), issued by ISS, for
audience AUD, unexpired, and not revoked here; anything else is answered 401. The tool
`whoami` returns the claims of the token its call came with (sub, aud, client_id, scope, act).
With `--store` it is also the store's checkout server: `add_to_cart` and `checkout` (the schemas
of config/manga-tools.json) act for the token's `sub` — the cart and the order are the
shopper's — and say so in their results.

Control endpoints (no token needed; test use only):
  GET  /control/seen         every accepted token's claims, in order (jti, sub, aud, client_id)
  GET  /control/refused      how many requests were refused, by reason
  POST /control/revoke-seen  every token accepted so far is refused from now on (a revocation
                             the gateway learns of only by the 401)

Readiness: prints `READY <port>` on stdout once listening.
"""

import argparse
import json
import sys

import anyio
import jwt
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("auth-peer")
SEEN: list[dict] = []
REVOKED: set[str] = set()
REFUSED: dict[str, int] = {}


@server.tool()
def whoami(ctx: Context) -> dict:
    """The claims of the access token this call came with."""
    claims = ctx.request_context.request.state.claims
    return {k: claims.get(k) for k in ("sub", "aud", "client_id", "scope", "act", "iss")}


CARTS: dict[str, list[dict]] = {}


def _shopper(ctx: Context) -> str:
    return ctx.request_context.request.state.claims["sub"]


def add_to_cart(manga_id: str, ctx: Context, quantity: int = 1) -> dict:
    """Add a manga item to the customer's shopping cart."""
    cart = CARTS.setdefault(_shopper(ctx), [])
    cart.append({"manga_id": manga_id, "quantity": quantity})
    return {"cart_of": _shopper(ctx), "items": len(cart)}


def checkout(shipping_address_id: str, payment_method_id: str, ctx: Context, gift_wrap: bool = False) -> dict:
    """Process checkout for the current cart and create an order."""
    items = CARTS.pop(_shopper(ctx), [])
    return {"order_for": _shopper(ctx), "items": len(items), "gift_wrap": gift_wrap}


def _json(status: int, body) -> tuple[int, bytes]:
    return status, json.dumps(body).encode()


class RequireToken:
    """Pure ASGI middleware: validates the bearer JWT before the MCP app sees the request."""

    def __init__(self, app, jwks_url: str, issuer: str, audience: str):
        self.app = app
        self.jwks = jwt.PyJWKClient(jwks_url, cache_keys=True)
        self.issuer = issuer
        self.audience = audience

    async def _send(self, send, status: int, body: bytes, extra=()):
        headers = [(b"content-type", b"application/json")] + list(extra)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _refuse(self, reason: str) -> tuple[int, bytes]:
        REFUSED[reason] = REFUSED.get(reason, 0) + 1
        return _json(401, {"error": "invalid_token", "reason": reason})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if path == "/control/seen":
            return await self._send(send, *_json(200, SEEN))
        if path == "/control/refused":
            return await self._send(send, *_json(200, REFUSED))
        if path == "/control/revoke-seen":
            REVOKED.update(c["jti"] for c in SEEN if c.get("jti"))
            return await self._send(send, *_json(200, {"revoked": len(REVOKED)}))
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if not auth.startswith("Bearer "):
            status, body = self._refuse("missing")
            return await self._send(send, status, body, [(b"www-authenticate", b"Bearer")])
        token = auth[len("Bearer "):]
        try:
            key = await anyio.to_thread.run_sync(self.jwks.get_signing_key_from_jwt, token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256", "PS256", "ES256"],
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iat", "sub"]},
            )
        except jwt.PyJWTError as error:
            status, body = self._refuse(type(error).__name__)
            return await self._send(send, status, body, [(b"www-authenticate", b'Bearer error="invalid_token"')])
        if claims.get("jti") in REVOKED:
            status, body = self._refuse("revoked")
            return await self._send(send, status, body, [(b"www-authenticate", b'Bearer error="invalid_token"')])
        if not SEEN or SEEN[-1].get("jti") != claims.get("jti"):
            SEEN.append({k: claims.get(k) for k in ("jti", "sub", "aud", "client_id", "scope", "act")})
        scope.setdefault("state", {})["claims"] = claims
        return await self.app(scope, receive, send)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve(args: argparse.Namespace) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True, host="127.0.0.1")
    guarded = RequireToken(app, args.jwks, args.issuer, args.audience)
    config = uvicorn.Config(guarded, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")
    await _Uvicorn(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--jwks", required=True)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--audience", required=True)
    parser.add_argument("--store", action="store_true", help="also serve add_to_cart and checkout")
    args = parser.parse_args()
    if args.store:
        server.tool()(add_to_cart)
        server.tool()(checkout)
    anyio.run(_serve, args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
