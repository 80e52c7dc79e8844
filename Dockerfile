# Example sandbox image with pistis. tests/integration/docker-example.sh builds it as it
# is (docs/entry.md). Build the binaries first (`make`), then from the top of the tree:
#
#   docker build -t sandbox-image .
#   docker run --rm -i -v box-data:/data --entrypoint sh sandbox-image \
#       -c 'umask 077 && mkdir -p /data/pistis && cat >/data/pistis/token' <box.token
#   docker run -d -v box-data:/data -e PISTIS_RELAY=wss://relay.example.com/sandbox \
#       -e PISTIS_TOKEN_FILE=/data/pistis/token sandbox-image
#
# (box.token: the sandbox's token, as in server-min's pistis.json; docs/entry.md.)
# Any base works: the four binaries are static (musl). pistisd-musl is the same file as
# pistisd under the name other images' COPY lines use.
FROM debian:bookworm-slim

# Whatever the agents need: compilers, git, language runtimes …
# RUN apt-get update && apt-get install -y --no-install-recommends git build-essential \
#     && rm -rf /var/lib/apt/lists/*

COPY build/bin/pistisd build/bin/pistisd-musl build/bin/pi-env build/bin/pistisd-entry \
     /usr/local/bin/

# The persistent volume: uid registry, homes, trusted scripts, secrets, serve.conf.
VOLUME /data

# PID 1: reaps, forwards signals, prepares /data (root:root 0755), runs
# `pistisd users ensure-base`, then starts and supervises `pistisd serve` configured from
# /data/pistis/serve.conf or PISTIS_RELAY / PISTIS_TOKEN_FILE. No --init or tini needed.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/pistisd-entry"]
# Options go in CMD, e.g. a shorter grace period than `docker stop -t`:
# CMD ["--grace", "8"]
