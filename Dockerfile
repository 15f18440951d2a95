# mcp-gateway sidecar image: a static-ish release binary on a small Debian base.
# Build:  docker build -t mcp-gateway .
# Run:    docker run --rm -p 127.0.0.1:8080:8080 mcp-gateway serve --demo --listen 0.0.0.0:8080 --allow-non-loopback
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY src ./src
COPY config ./config
RUN cargo build --release --locked --bin mcp-gateway

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 gateway
COPY --from=build /src/target/release/mcp-gateway /usr/local/bin/mcp-gateway
COPY config /etc/mcp-gateway
USER gateway
EXPOSE 8080
# In the ECS task the orchestrator reaches the sidecar on localhost (awsvpc networking shares
# the loopback interface), so the default loopback listen address is the right one.
ENTRYPOINT ["/usr/local/bin/mcp-gateway"]
CMD ["serve", "--config", "/etc/mcp-gateway/example.toml"]
