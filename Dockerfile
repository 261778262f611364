# syntax=docker/dockerfile:1
# cardhour image: `docker build -t cardhour .` (or `docker compose up --build`, see docker-compose.yml).

# Builder on bookworm, like the runtime below (a binary built against a newer glibc would not start there).
FROM rust:1-bookworm AS builder
WORKDIR /src
# sqlx's query macros read the committed .sqlx/ instead of a live database.
ENV SQLX_OFFLINE=true \
    CARGO_TERM_COLOR=never
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin cardhour \
    && install -m 0755 target/release/cardhour /usr/local/bin/cardhour

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin cardhour
COPY --from=builder /usr/local/bin/cardhour /usr/local/bin/cardhour
USER cardhour
ENTRYPOINT ["cardhour"]
CMD ["worker"]
