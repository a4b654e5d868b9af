// A real OpenID Provider for tests/test_oauth_real.py: panva's oidc-provider (OpenID Certified), configured as
// an authorization server for MCP: resource indicators (RFC 8707) with JWT access tokens (RFC 9068), the client
// credentials grant, dynamic client registration (RFC 7591), authorization code + PKCE with the development
// login and consent pages (the test fills them in over HTTP), and token introspection (RFC 7662).
//
//   PORT=... KEYS=keys.json node provider.mjs     (prints "ready <issuer>" when it listens)
//
// KEYS holds the private signing keys (a JWKS the test made); restarting with another set is a key rotation.
// Clients: "machine" (client credentials, JWT tokens), "opaque-machine" (client credentials, opaque tokens),
// "gateway" (the gateway's own client, for introspection), "dashboard" (with DASHBOARD_REDIRECT: the web
// dashboard's public client), "upstream-client" (client credentials for UPSTREAM_RESOURCE, an upstream
// server). The scopes a resource server grants: tooldock:*.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const keys = JSON.parse(readFileSync(process.env.KEYS, 'utf8'));
const SCOPES = 'tooldock:read tooldock:write tooldock:admin';
const UPSTREAM = process.env.UPSTREAM_RESOURCE; // an upstream MCP server's resource: its own scope, its own audience

const configuration = {
  jwks: keys,
  clients: [
    { client_id: 'machine', client_secret: 'machine-secret-0123456789', grant_types: ['client_credentials'],
      redirect_uris: [], response_types: [], scope: SCOPES },
    { client_id: 'opaque-machine', client_secret: 'opaque-secret-0123456789', grant_types: ['client_credentials'],
      redirect_uris: [], response_types: [], scope: SCOPES },
    { client_id: 'gateway', client_secret: 'gateway-secret-0123456789', grant_types: ['client_credentials'],
      redirect_uris: [], response_types: [] },
    // The web dashboard: a public client (PKCE, no secret); its redirect URI's origin may call the token endpoint.
    ...(process.env.DASHBOARD_REDIRECT ? [{ client_id: 'dashboard', token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'], response_types: ['code'],
      redirect_uris: [process.env.DASHBOARD_REDIRECT], scope: `openid ${SCOPES}` }] : []),
    // An upstream MCP server's own client at this issuer (tooldock's client credentials for that upstream).
    { client_id: 'upstream-client', client_secret: 'upstream-secret-0123456789',
      grant_types: ['client_credentials'], redirect_uris: [], response_types: [], scope: 'upstream:read' },
  ],
  scopes: ['openid', 'offline_access', 'upstream:read', ...SCOPES.split(' ')],
  clientDefaults: { token_endpoint_auth_method: 'client_secret_basic' },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resourceIndicator, client) => ({
        scope: resourceIndicator === UPSTREAM ? 'upstream:read' : SCOPES,
        audience: resourceIndicator,
        accessTokenTTL: Number(process.env.TOKEN_TTL || 300),
        accessTokenFormat: client.clientId === 'opaque-machine' ? 'opaque' : 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  // The development interactions ask for a login and a consent; an account is whatever name was typed.
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  loadExistingGrant: async (ctx) => {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
  },
};

const provider = new Provider(issuer, configuration);
provider.on('server_error', (ctx, err) => console.error('server_error', err));
provider.listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
