# mcp-gateway sidecar image: a stripped release binary on distroless/cc (glibc, libgcc,
# CA certificates, nothing else: no shell, no package manager). The health check is the
# binary's own `healthcheck` subcommand, so nothing else is needed inside.
#   docker build -t mcp-gateway .
#   docker run --rm -p 127.0.0.1:8080:8080 mcp-gateway serve --demo --listen 0.0.0.0:8080 --allow-non-loopback
# See docs/deployment.md for the choices.

# Built on bookworm: the binary links glibc dynamically, and distroless/cc-debian12 is
# bookworm's glibc (a newer build image would need symbols the runtime does not have).
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Strip symbols and skip debug info in the image's binary (the repository's release profile
# keeps line tables for local profiling); these apply to every crate, so set them before the
# dependency layer.
ENV CARGO_PROFILE_RELEASE_STRIP=symbols \
    CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_TERM_COLOR=never

# Profile-guided optimisation with the committed profile (bench/pgo.sh records it from the
# gateway under its typical load; bench/README.md): the hot path laid out together,
# fewer cache misses per call. Functions changed since the profile was taken are compiled
# without it. It applies to every crate, so it is set before the dependency layer too.
COPY pgo ./pgo
ENV RUSTFLAGS="-Cprofile-use=/src/pgo/mcp-gateway.profdata -Cllvm-args=-no-pgo-warn-mismatch"

# Dependency layer: build every dependency against a stub crate, so a change under src/
# rebuilds only this crate. The stub's own artifacts and fingerprints are removed, so the
# real sources are always compiled (their copied mtimes may be older than the stub's).
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked --bin mcp-gateway \
    && rm -rf src target/release/mcp-gateway* target/release/deps/mcp_gateway-* \
        target/release/deps/libmcp_gateway-* target/release/.fingerprint/mcp-gateway-*

COPY config ./config
COPY src ./src
RUN cargo build --release --locked --bin mcp-gateway

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/mcp-gateway /usr/local/bin/mcp-gateway
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
