# Sluice on plain workerd. Build: docker build -t sluice . (or docker compose up --build).
# Runs `sluice serve` (container/entrypoint.sh) as a non-root user: public API on 8080, admin API
# on 8081 of the container's loopback (SLUICE_ADMIN=0.0.0.0:8081 to publish it, on the host's
# loopback or a private network only), config read from /etc/sluice
# (mount yours read-only), Durable Object state in /var/lib/sluice (a volume), secrets from the
# environment. See docs/deploy.md.

# The project's Node (package.json pins node 22.23.3); bookworm-slim is a small glibc base, which
# the workerd binary needs.
ARG NODE_IMAGE=node:22.23.3-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
# The same bundle `wrangler deploy` would upload, and the workerd binary npm installed for this
# architecture (a single executable that needs only glibc).
RUN npm run build && cp node_modules/workerd/bin/workerd /workerd && /workerd --version

FROM ${NODE_IMAGE} AS deps
WORKDIR /src
COPY package.json package-lock.json ./
# The CLI's runtime dependencies only (yaml, zod and the rest of "dependencies").
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE} AS runtime
RUN groupadd --system sluice \
 && useradd --system --gid sluice --home-dir /var/lib/sluice --no-create-home --shell /usr/sbin/nologin sluice \
 && mkdir -p /var/lib/sluice /etc/sluice \
 && chown sluice:sluice /var/lib/sluice
WORKDIR /app
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /workerd /usr/local/bin/workerd
COPY package.json wrangler.toml ./
COPY cli ./cli
COPY src ./src
COPY local-stack/build.ts ./local-stack/build.ts
COPY container ./container
# The bundled demo config, so the image starts on its own; mount yours over it.
COPY config /etc/sluice
ENV SLUICE_WORKERD=/usr/local/bin/workerd \
    SLUICE_HOME=/app \
    NODE_ENV=production
USER sluice
EXPOSE 8080 8081
VOLUME ["/var/lib/sluice"]
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 CMD ["node", "/app/container/healthcheck.js"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/app/container/entrypoint.sh"]
