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
# tini as PID 1 forwards SIGTERM (`docker stop`) and reaps children; the fonts set the PDF statements (Chinese
# names in Noto Sans CJK, symbols in DejaVu Sans, emoji in Symbola); curl for the compose health check (/readyz).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl tzdata tini \
       fonts-noto-cjk fonts-dejavu-core fonts-symbola \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin cardhour
COPY --from=builder /usr/local/bin/cardhour /usr/local/bin/cardhour
USER cardhour
# SIGTERM: the server finishes its requests, the worker the hour it is storing (CARDHOUR_SHUTDOWN_GRACE).
ENTRYPOINT ["/usr/bin/tini", "--", "cardhour"]
CMD ["worker"]
