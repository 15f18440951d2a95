# mcp-gateway sidecar image: the stripped shipped binary (Cargo.toml's `dist` profile: fat LTO,
# one codegen unit, and the optimisation profile of pgo/) on distroless/cc (glibc, libgcc,
# CA certificates, nothing else: no shell, no package manager). The health check is the
# binary's own `healthcheck` subcommand, so nothing else is needed inside.
#   docker build -t mcp-gateway .
#   docker run --rm -p 127.0.0.1:8080:8080 mcp-gateway serve --demo --listen 0.0.0.0:8080 --allow-non-loopback
# See README "Deploying" for the choices.

# Built on bookworm: the binary links glibc dynamically, and distroless/cc-debian12 is
# bookworm's glibc (a newer build image would need symbols the runtime does not have).
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Strip symbols and skip debug info in the image's binary (the `dist` profile keeps line tables
# for local profiling); these apply to every crate, so set them before the dependency layer.
ENV CARGO_PROFILE_DIST_STRIP=symbols \
    CARGO_PROFILE_DIST_DEBUG=0 \
    CARGO_TERM_COLOR=never

# Profile-guided optimisation with the committed profile (bench/pgo.sh records it from the
# gateway under its typical load; scripts/build-dist.sh builds the same outside the image): the
# hot path laid out together, fewer cache misses per call. Functions changed since the profile
# was taken are compiled without it. It applies to every crate, so it is set before the
# dependency layer too (a cargo profile cannot carry it).
COPY pgo ./pgo
ENV RUSTFLAGS="-Cprofile-use=/src/pgo/mcp-gateway.profdata -Cllvm-args=-no-pgo-warn-mismatch"

# Dependency layer: build every dependency against a stub crate, so a change under src/
# rebuilds only this crate. The stub's own artifacts and fingerprints are removed, so the
# real sources are always compiled (their copied mtimes may be older than the stub's).
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --profile dist --locked --bin mcp-gateway \
    && rm -rf src target/dist/mcp-gateway* target/dist/deps/mcp_gateway-* \
        target/dist/deps/libmcp_gateway-* target/dist/.fingerprint/mcp-gateway-*

COPY config ./config
COPY src ./src
RUN cargo build --profile dist --locked --bin mcp-gateway

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/dist/mcp-gateway /usr/local/bin/mcp-gateway
# The example configuration and the store's catalogue (compose imports it into the registry).
COPY config /etc/mcp-gateway
# distroless "nonroot" (65532), numeric so Kubernetes/ECS can verify runAsNonRoot.
USER 65532:65532
EXPOSE 8080 9464
# Liveness: exit 0 when GET /healthz on the configured listen port answers 200.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD ["/usr/local/bin/mcp-gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mcp-gateway"]
CMD ["serve"]
