import cookie from "@fastify/cookie";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import Fastify, { type FastifyInstance } from "fastify";
import { sql } from "kysely";
import { Chains } from "./chain/chains.ts";
import { SimulatedLedger } from "./chain/simulated/ledger.ts";
import { type Config, ENVIRONMENTS, type Environment } from "./config.ts";
import type { AppContext } from "./context.ts";
import { firstLine } from "./domain/errors.ts";
import { agentsAndWalletsRoutes } from "./modules/agents/routes.ts";
import { AgentsService } from "./modules/agents/service.ts";
import { CardProvider, type CardProviders } from "./modules/card/provider.ts";
import { CardRefunds } from "./modules/card/refunds.ts";
import { cardWebhookRoutes } from "./modules/card/routes.ts";
import { CardWebhooks } from "./modules/card/service.ts";
import { Logins } from "./modules/dashboard/login.ts";
import { dashboardRoutes } from "./modules/dashboard/routes.ts";
import { SessionsService, sessionCookieName } from "./modules/dashboard/sessions.ts";
import { hostedPageEventsRoutes } from "./modules/hosted-page/events.ts";
import { hostedPageLogoRoutes } from "./modules/hosted-page/logo-routes.ts";
import { hostedPageRoutes } from "./modules/hosted-page/routes.ts";
import { keysRoutes } from "./modules/keys/routes.ts";
import { KeysService } from "./modules/keys/service.ts";
import { NetworkDirectory } from "./modules/networks/directory.ts";
import { networksRoutes } from "./modules/networks/routes.ts";
import { onrampRoutes } from "./modules/onramp/routes.ts";
import { OnrampService } from "./modules/onramp/service.ts";
import { UnmatchedInbox } from "./modules/payments/inbox/unmatched.ts";
import { unmatchedRoutes } from "./modules/payments/inbox/unmatched-routes.ts";
import { RefundShares } from "./modules/payments/refund-shares.ts";
import { paymentsRoutes } from "./modules/payments/routes.ts";
import { PaymentsService } from "./modules/payments/service.ts";
import { settlementTransferKind } from "./modules/payments/settlement/kind.ts";
import { settlementsRoutes } from "./modules/payments/settlement/settlements-routes.ts";
import { SettlementsService } from "./modules/payments/settlement/settlements-service.ts";
import { payoutTransferKind } from "./modules/payouts/kind.ts";
import { payoutsRoutes } from "./modules/payouts/routes.ts";
import { PayoutsService } from "./modules/payouts/service.ts";
import { WorkspaceWalletService } from "./modules/payouts/workspace-wallet.ts";
import { refundsRoutes } from "./modules/refunds/routes.ts";
import { RefundsService } from "./modules/refunds/service.ts";
import { refundTransferKinds, WalletRefunds } from "./modules/refunds/wallet-refunds.ts";
import { smartWalletRoutes } from "./modules/smart-wallets/routes.ts";
import { SmartWalletsService } from "./modules/smart-wallets/service.ts";
import { splitsRoutes } from "./modules/splits/routes.ts";
import { SplitsService } from "./modules/splits/service.ts";
import { swapTransferKind } from "./modules/swaps/kind.ts";
import { swapsRoutes } from "./modules/swaps/routes.ts";
import { SwapsService } from "./modules/swaps/service.ts";
import { buildSwapVenues } from "./modules/swaps/venues.ts";
import { TransfersService } from "./modules/transfers/service.ts";
import { AgentPaymentsService } from "./modules/wallets/agent-payments.ts";
import { agentPaymentsRoutes } from "./modules/wallets/agent-payments-routes.ts";
import { AgentWalletsService } from "./modules/wallets/service.ts";
import { webhooksRoutes } from "./modules/webhooks/routes.ts";
import { WebhooksService } from "./modules/webhooks/service.ts";
import { BrandingService } from "./modules/workspaces/branding.ts";
import { workspaceLogoRoutes } from "./modules/workspaces/logo-routes.ts";
import { workspacesRoutes } from "./modules/workspaces/routes.ts";
import { WorkspacesService } from "./modules/workspaces/service.ts";
import { x402Routes } from "./modules/x402/routes.ts";
import { X402Service } from "./modules/x402/service.ts";
import { FacilitatorWallets } from "./modules/x402/wallets.ts";
import { InFlight } from "./platform/concurrency/in-flight.ts";
import { type Db, poolStats } from "./platform/db/database.ts";
import { registerAuth } from "./platform/http/auth.ts";
import { answerFrameworkError, registerErrorHandling } from "./platform/http/error-handler.ts";
import { registerGracefulClose } from "./platform/http/graceful-close.ts";
import { registerHsts } from "./platform/http/hsts.ts";
import { parseJsonBody } from "./platform/http/input-rules.ts";
import { registerLingeringClose } from "./platform/http/lingering-close.ts";
import { registerOpenApi } from "./platform/http/openapi.ts";
import { registerRateLimit } from "./platform/http/rate-limit.ts";
import { type ReadinessChecks, registerReadiness } from "./platform/http/readiness.ts";
import { registerRequestId, requestIdOf } from "./platform/http/request-id.ts";
import { registerValidation } from "./platform/http/validation.ts";
import { loggerOptions, urlScrubber } from "./platform/log/scrub.ts";
import { createMailer, type Mailer } from "./platform/mail/mailer.ts";
import { Metrics } from "./platform/metrics/metrics.ts";
import { registerMetrics } from "./platform/metrics/routes.ts";
import type { SecretBox } from "./platform/secrets/encryption.ts";
import { PASSWORD_COST, type ScryptCost } from "./platform/secrets/hashing.ts";
import { buildRails, type Rails } from "./rails/index.ts";

export interface AppDependencies {
  config: Config;
  db: Db;
  secrets: SecretBox;
  now?: () => Date;
  /** Tests hand in a mailer pointed at their SMTP listener; otherwise built from the config. */
  mailer?: Mailer;
  /** pino options, or false in tests that want silence. */
  logger?: boolean | Record<string, unknown>;
  /** Unset: PASSWORD_COST. The suites pass a cheaper one (0.3–0.7 s of scrypt a sign-in else). */
  passwordCost?: ScryptCost;
}

export interface App {
  http: FastifyInstance;
  ctx: AppContext;
  metrics: Metrics;
  /** How money leaves workspace wallets, per environment and wallet kind (src/rails). */
  rails: Rails;
  services: {
    workspaces: WorkspacesService;
    /** A workspace's checkout branding (D25). */
    branding: BrandingService;
    keys: KeysService;
    payments: PaymentsService;
    webhooks: WebhooksService;
    /** The one engine every movement out of a workspace wallet goes through. */
    transfers: TransfersService;
    payouts: PayoutsService;
    wallet: WorkspaceWalletService;
    ledger: SimulatedLedger;
    sessions: SessionsService;
    smartWallets: SmartWalletsService;
    agents: AgentsService;
    agentWallets: AgentWalletsService;
    /** Agent wallets' spending policies and x402 payments (D23). */
    agentPayments: AgentPaymentsService;
    splits: SplitsService;
    settlements: SettlementsService;
    refunds: RefundsService;
    unmatched: UnmatchedInbox;
    cardRefunds: CardRefunds;
    swaps: SwapsService;
    onramp: OnrampService;
    x402: X402Service;
  };
}

const ONE_MIB = 1024 * 1024;

export async function buildApp(deps: AppDependencies): Promise<App> {
  const { token: metricsToken, port: metricsPort } = deps.config.metrics;
  const metrics = new Metrics(metricsToken !== undefined || metricsPort !== undefined);
  const http = Fastify({
    // Keys and secrets travel in headers and bodies, and RPC URLs often hold a provider's key:
    // never log any of them (platform/log/scrub.ts).
    logger: deps.logger ?? loggerOptions(deps.config),
    bodyLimit: ONE_MIB,
    // Requests waiting on a full database pool should not hang forever behind a load balancer.
    requestTimeout: 30_000,
    routerOptions: { ignoreTrailingSlash: true },
    // Errors Fastify raises before routing (a malformed %-escape in the URL) get our body too.
    // No hook runs for these, so their request id and their count are added here.
    frameworkErrors: (error, request, reply) => {
      reply.header("x-request-id", request.id);
      answerFrameworkError(error, request, reply);
      metrics.httpRequest(request.method, undefined, reply.statusCode, reply.elapsedTime / 1000);
    },
    genReqId: requestIdOf,
    // Behind a load balancer, request.ip is the client X-Forwarded-For names, but only when the
    // connection comes from a proxy the operator listed (anyone can send the header).
    trustProxy: deps.config.trustProxy.length > 0 ? deps.config.trustProxy : false,
  }).withTypeProvider<TypeBoxTypeProvider>();
  const inFlight = new InFlight();
  registerGracefulClose(http, inFlight);
  // An answer before the whole body arrived (413, 401) closes its connection without a reset.
  registerLingeringClose(http);
  registerRequestId(http);
  registerHsts(http, deps.config.publicBaseUrl);
  registerMetrics(http, metrics, metricsToken);

  const chains = Chains.of(
    [...deps.config.networks.sandbox, ...deps.config.networks.live],
    deps.db,
    http.log,
  );
  const ctx: AppContext = {
    config: deps.config,
    db: deps.db,
    secrets: deps.secrets,
    log: http.log,
    chains,
    directory: new NetworkDirectory(deps.config),
    now: deps.now ?? (() => new Date()),
    inFlight,
    metrics,
    passwordCost: deps.passwordCost ?? PASSWORD_COST,
  };
  const workspaces = new WorkspacesService(ctx);
  const branding = new BrandingService(ctx);
  const keys = new KeysService(ctx);
  const ledger = new SimulatedLedger(deps.db);
  const cardProviders: CardProviders = {};
  for (const environment of ENVIRONMENTS) {
    const card = deps.config.card[environment];
    if (card) cardProviders[environment] = new CardProvider(card, deps.config.card.apiBase);
  }
  const splits = new SplitsService(ctx, workspaces);
  const settlements = new SettlementsService(ctx);
  const payments = new PaymentsService(ctx, workspaces, splits, cardProviders);
  const refundShares = new RefundShares();
  const cardRefunds = new CardRefunds(ctx, cardProviders, refundShares);
  const unmatched = new UnmatchedInbox(ctx, workspaces);
  const webhooks = new WebhooksService(ctx);
  const sessions = new SessionsService(ctx);
  const agents = new AgentsService(ctx);
  const agentWallets = new AgentWalletsService(ctx, agents, ledger);
  const agentPayments = new AgentPaymentsService(ctx, agentWallets);
  // Money leaves workspace wallets through the rails (src/rails), one set per process.
  const { rails, smartAccounts } = buildRails(chains, ledger, deps.db);
  // Smart wallet addresses come from the account factory of live's first network with a bundler,
  // the default first (else the sandbox's): the other networks must have the factory at the same
  // address (docs/api.md). A network without a bundler has no smart wallet to ask.
  const accountsOf = (environment: Environment) =>
    chains
      .in(environment)
      .map((chain) => smartAccounts.get(`${environment}.${chain.config.id}`))
      .find((accounts) => accounts !== undefined);
  const smartWallets = new SmartWalletsService(ctx, workspaces, accountsOf("live") ?? accountsOf("sandbox"));
  // Where each environment's swaps trade (D16): Uniswap v3 on a network, the ledger's pools in the sandbox.
  const swapVenues = buildSwapVenues(deps.config, deps.db, ledger);
  const mailer = deps.mailer ?? createMailer({ smtpUrl: deps.config.smtpUrl, dataDir: deps.config.dataDir });
  http.addHook("onClose", async () => mailer.close());
  // Every movement out of a workspace wallet goes through the one engine; each kind is described
  // by the module that orders it.
  const transfers = new TransfersService(ctx, {
    workspaces,
    payments,
    rails,
    mailer,
    kinds: {
      payout: payoutTransferKind,
      ...refundTransferKinds(deps.db, refundShares, unmatched),
      swap: swapTransferKind(deps.db, swapVenues),
      settlement: settlementTransferKind(deps.db),
    },
  });
  const payouts = new PayoutsService(ctx, { workspaces, transfers });
  http.addHook("onClose", async () => payouts.close());
  const refunds = new RefundsService(ctx, {
    payments,
    workspaces,
    shares: refundShares,
    inbox: unmatched,
    wallet: new WalletRefunds(transfers),
    card: cardRefunds,
  });
  const swaps = new SwapsService(ctx, { transfers, venues: swapVenues });
  const onramp = new OnrampService(ctx, {
    providers: cardProviders,
    wallets: transfers,
    ledger,
    inbox: unmatched,
  });
  const cardWebhooks = new CardWebhooks(ctx, cardProviders, payments, cardRefunds, onramp);
  const wallet = new WorkspaceWalletService(
    ctx,
    workspaces,
    rails,
    ledger,
    payments,
    agentWallets,
    (tenant) => swaps.totals(tenant),
  );
  const x402 = new X402Service(ctx, { workspaces, payments, ledger, wallets: new FacilitatorWallets(ctx) });
  const scrub = urlScrubber(deps.config);
  metrics.setSources({
    pausedWorkspaces: () => transfers.pausedWorkspaces(),
    webhookBacklog: () => webhooks.backlog(),
    pools: () => poolStats(deps.db),
    stuckOnrampSessions: () => onramp.stuck(),
  });

  registerErrorHandling(http);
  registerValidation(http);
  registerJsonParser(http);

  await registerOpenApi(http, deps.config.publicBaseUrl, {
    sessionCookie: sessionCookieName(deps.config.publicBaseUrl),
  });

  await http.register(cookie);
  registerAuth(http, {
    adminSecret: deps.config.adminSecret,
    resolveKey: (key) => keys.resolve(key),
    sessionCookie: sessionCookieName(deps.config.publicBaseUrl),
    resolveSession: (token) => sessions.resolve(token),
  });
  await registerRateLimit(http, { ...deps.config.rateLimit, redisUrl: deps.config.redisUrl });

  http.get("/health", { config: { auth: "none" }, schema: { hide: true } }, async () => ({ status: "ok" }));
  const checks: ReadinessChecks = { database: () => sql`SELECT 1`.execute(deps.db) };
  for (const environment of ENVIRONMENTS) {
    // The default network's checks keep their names (`live.rpc`); another's names it (`live.base.rpc`).
    for (const [i, { config, network }] of chains.in(environment).entries()) {
      const name = i === 0 ? environment : `${environment}.${config.id}`;
      checks[`${name}.rpc`] = () => network.head();
      const accounts = smartAccounts.get(`${environment}.${config.id}`);
      if (accounts) checks[`${name}.bundler`] = () => accounts.bundlerAnswers();
    }
  }
  registerReadiness(http, checks, (err) =>
    scrub(err instanceof Error ? firstLine(err.message) : String(err)),
  );
  http.get("/openapi.json", { config: { auth: "none" }, schema: { hide: true } }, async () => http.swagger());

  await http.register(workspacesRoutes(workspaces, branding));
  await http.register(workspaceLogoRoutes(branding));
  await http.register(keysRoutes(keys));
  await http.register(networksRoutes(ctx.directory));
  await http.register(paymentsRoutes(payments));
  await http.register(unmatchedRoutes(unmatched));
  await http.register(refundsRoutes(refunds));
  await http.register(swapsRoutes(swaps));
  await http.register(onrampRoutes(onramp));
  await http.register(splitsRoutes(splits));
  await http.register(settlementsRoutes(settlements));
  await http.register(webhooksRoutes(webhooks));
  await http.register(payoutsRoutes(payouts, wallet));
  await http.register(cardWebhookRoutes(cardWebhooks));
  await http.register(hostedPageRoutes(ctx, payments, workspaces));
  await http.register(hostedPageLogoRoutes(payments, branding));
  await http.register(hostedPageEventsRoutes(ctx, payments));
  await http.register(smartWalletRoutes(smartWallets));
  await http.register(agentsAndWalletsRoutes(agents, agentWallets));
  await http.register(x402Routes(x402));
  await http.register(agentPaymentsRoutes(agentPayments));
  await http.register(
    dashboardRoutes(ctx, {
      sessions,
      logins: new Logins(ctx, workspaces),
      mailer,
      workspaces,
      branding,
      payments,
      payouts,
      wallet,
      webhooks,
      keys,
      smartWallets,
      splits,
      settlements,
      refunds,
      unmatched,
      agentWallets,
      agentPayments,
    }),
  );

  return {
    http,
    ctx,
    metrics,
    rails,
    services: {
      workspaces,
      branding,
      keys,
      payments,
      webhooks,
      transfers,
      payouts,
      wallet,
      ledger,
      sessions,
      smartWallets,
      agents,
      agentWallets,
      agentPayments,
      splits,
      settlements,
      refunds,
      unmatched,
      cardRefunds,
      swaps,
      onramp,
      x402,
    },
  };
}

/**
 * JSON bodies (D10): parsed and checked by the shared rules of input-rules.ts (text, nesting,
 * prototype keys) before any route sees them. An empty body is accepted as "no body":
 * `POST /payments/{id}/cancel` takes none, and clients send the header anyway.
 */
function registerJsonParser(http: FastifyInstance): void {
  // JSON only (D10): anything else, text/plain included, is a 415.
  http.removeAllContentTypeParsers();
  http.addContentTypeParser(
    "application/json",
    { parseAs: "string", bodyLimit: ONE_MIB },
    (_request, body, done) => {
      let parsed: unknown;
      try {
        parsed = parseJsonBody(body.toString());
      } catch (err) {
        done(err as Error, undefined);
        return;
      }
      done(null, parsed);
    },
  );
}
