// Real OAuth 2.0 servers for the upstream-credentials tests, in one Node 22 process:
//
// * the shoppers' identity provider: npm `oauth2-mock-server` (signed RS256 JWTs, a JWKS, the
//   password grant). A shopper's access token comes from a real token request to it
//   (`grant_type=password&username=…&scope=…`), with `aud` = "storefront" (or the value of
//   `--shopper-audience`) and the requested `scope`; a request's `expires_in` field (seconds)
//   sets the token's `exp` to that far from now (a short-lived shopper).
// * the gateway's authorization server: npm `oidc-provider` (a certified OpenID provider) with
//   one confidential client, `mcp-gateway` (client_secret_basic and client_secret_post), the
//   native client_credentials grant, and RFC 8693 token exchange registered with
//   `registerGrantType`: the subject token is verified against the identity provider's JWKS
//   (issuer and audience checked, by `jose`), and the issued JWT access token has
//   `sub` = the shopper, `aud` = the requested resource, `act.sub` = the gateway's client.
//   Access tokens are JWTs (resource indicators), signed by the provider's own RS256 key.
//
// Usage: node oauth_peer.mjs --secret-file PATH [--ttl SECONDS] [--shopper-audience AUD]
// Prints one line `READY {"idp": URL, "as": URL, "control": URL}` once all three listen.
// Control (GET): /stats -> token requests by grant and outcome at the authorization server.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';

import { OAuth2Server } from 'oauth2-mock-server';
import Provider, { errors } from 'oidc-provider';
import { createRemoteJWKSet, exportJWK, generateKeyPair, jwtVerify } from 'jose';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const secret = readFileSync(option('--secret-file'), 'utf8').trim();
const ttl = Number(option('--ttl', '3600'));
// The audience of shoppers' tokens: the party they are issued to (and the only audience the
// authorization server accepts as a subject token).
const shopperAudience = option('--shopper-audience', 'storefront');

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const RESOURCES = new Set(['urn:mcp:checkout', 'urn:mcp:catalog']);
const SCOPES = 'cart:read cart:write orders:read';

const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));

// --- the shoppers' identity provider ----------------------------------------------------------
const idp = new OAuth2Server();
await idp.issuer.keys.generate('RS256');
idp.service.on('beforeTokenSigning', (token, req) => {
  if (req.body?.grant_type === 'password') token.payload.aud = shopperAudience;
  if (req.body?.expires_in !== undefined) {
    token.payload.exp = Math.floor(Date.now() / 1000) + Number(req.body.expires_in);
  }
});
await idp.start(0, "127.0.0.1");
// The issuer as the tests reach it (the library names it `localhost`).
idp.issuer.url = `http://127.0.0.1:${idp.address().port}`;
const idpUrl = idp.issuer.url;
const idpKeys = createRemoteJWKSet(new URL(`${idpUrl}/jwks`));

// --- the gateway's authorization server --------------------------------------------------------
const stats = {};
const count = (grant, outcome) => {
  const key = `${grant}:${outcome}`;
  stats[key] = (stats[key] ?? 0) + 1;
};

const asServer = createServer();
const asPort = await listen(asServer);
const asUrl = `http://127.0.0.1:${asPort}`;
const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: 'as-key-1', use: 'sig', alg: 'RS256' };

const provider = new Provider(asUrl, {
  jwks: { keys: [signingKey] },
  clients: [{
    client_id: 'mcp-gateway',
    client_secret: secret,
    grant_types: ['client_credentials', EXCHANGE],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope: SCOPES,
  }, {
    client_id: 'mcp-gateway-post',
    client_secret: secret,
    grant_types: ['client_credentials', EXCHANGE],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_post',
    scope: SCOPES,
  }],
  scopes: SCOPES.split(' '),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (!RESOURCES.has(resource)) throw new errors.InvalidTarget();
        return { scope: SCOPES, audience: resource, accessTokenFormat: 'jwt', accessTokenTTL: ttl };
      },
    },
  },
  ttl: { ClientCredentials: ttl, AccessToken: ttl },
  // RFC 8693 §4.1: an exchanged token names the party acting for the subject.
  extraTokenClaims: (_ctx, token) => (token.gty === 'token_exchange' ? { act: { sub: token.clientId } } : undefined),
});
provider.proxy = false;

provider.registerGrantType(EXCHANGE, async (ctx) => {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest('unsupported subject_token_type');
  }
  if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest('unsupported requested_token_type');
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(params.subject_token, idpKeys, { issuer: idpUrl, audience: shopperAudience }));
  } catch (error) {
    throw new errors.InvalidGrant(`subject_token rejected (${error.code ?? error.name})`);
  }
  const resource = params.resource ?? params.audience;
  if (!resource || !RESOURCES.has(resource)) throw new errors.InvalidTarget();
  const asked = (params.scope ?? '').split(' ').filter(Boolean);
  const scope = asked.filter((s) => SCOPES.split(' ').includes(s)).join(' ') || undefined;
  const token = new provider.AccessToken({
    accountId: subject.sub,
    client,
    grantId: randomUUID(),
    gty: 'token_exchange',
    scope,
  });
  token.resourceServer = new provider.ResourceServer(resource, {
    audience: resource, scope: SCOPES, accessTokenFormat: 'jwt', accessTokenTTL: ttl,
  });
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope,
  };
}, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope', 'actor_token', 'actor_token_type']);

provider.on('grant.success', (ctx) => count(ctx.oidc.params.grant_type, 'success'));
provider.on('grant.error', (ctx) => count(ctx.oidc.params?.grant_type ?? 'unknown', 'error'));
provider.on('server_error', (_ctx, error) => console.error('oidc-provider server_error', error));

asServer.on('request', provider.callback());

// --- control ---------------------------------------------------------------------------------
const control = createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  if (req.url === '/stats') return res.end(JSON.stringify(stats));
  res.statusCode = 404;
  res.end('{}');
});
const controlPort = await listen(control);

console.log(`READY ${JSON.stringify({ idp: idpUrl, as: asUrl, control: `http://127.0.0.1:${controlPort}` })}`);
