// A real OAuth 2.0 authorization server for the identity tests: oauth2-mock-server's OAuth
// service (RS256-signed JWTs, a JWKS endpoint, the client_credentials grant) on a free
// loopback port. It prints {"issuer": …, "port": …} once listening. Tokens are fetched from
// its token endpoint over HTTP by the tests; this script only adds claims a real IdP would
// carry, from the token request's own form fields:
//   client_id -> sub (the caller's subject); scope and aud are the grant's own;
//   groups (space-separated) -> groups; expires_in (seconds, may be negative) -> exp;
//   iss_override -> iss (a token signed by this issuer's key that names another issuer).
// GET /_stats -> {"jwks": n}: how many times the JWKS was read.
import http from 'node:http';
import { OAuth2Server, Events } from 'oauth2-mock-server';

const oauth = new OAuth2Server();
await oauth.issuer.keys.generate('RS256');
oauth.service.on(Events.BeforeTokenSigning, (token, req) => {
  const body = req.body ?? {};
  token.payload.sub = body.client_id ?? 'anonymous-client';
  if (body.groups) token.payload.groups = String(body.groups).split(' ').filter(Boolean);
  if (body.expires_in !== undefined) {
    token.payload.exp = Math.floor(Date.now() / 1000) + Number(body.expires_in);
  }
  if (body.iss_override) token.payload.iss = String(body.iss_override);
});
let jwksReads = 0;
const handler = oauth.service.requestHandler;
const server = http.createServer((req, res) => {
  if (req.url === '/_stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ jwks: jwksReads }));
    return;
  }
  if (req.url === '/jwks') jwksReads += 1;
  handler(req, res);
});
server.listen(0, '127.0.0.1', () => {
  const port = server.address().port;
  oauth.issuer.url = `http://127.0.0.1:${port}`;
  console.log(JSON.stringify({ issuer: oauth.issuer.url, port }));
});
