# raftmq container image: one broker node, FROM scratch around a static binary.
#
# There is no builder stage on purpose: the machines this project is built on
# cannot pull any base image (not even golang), so the binary is compiled on the
# host first. Build the image with
#
#     make image        # = CGO_ENABLED=0 GOOS=linux go build -o bin/raftmq-linux-$GOARCH ./cmd/raftmq
#                       #   + prepare bin/rootfs/{data,tmp}
#                       #   + docker build -t raftmq:local .
#
# docs/docker.md shows an optional two-stage variant (golang builder + scratch)
# for machines that can pull images.

FROM scratch

# Path of the static linux binary inside the build context (see Makefile.docker).
ARG BINARY=bin/raftmq-linux-amd64

LABEL org.opencontainers.image.title="raftmq" \
      org.opencontainers.image.description="RocketMQ-style message broker replicated with hashicorp/raft" \
      org.opencontainers.image.source="https://github.com/raftmq/raftmq"

# bin/rootfs holds two empty directories made by `make image`: /data (the node's
# raft log, snapshots and message store) and /tmp (mode 1777). scratch has no
# mkdir, so they are copied in, owned by the unprivileged user below; a fresh
# named volume mounted on /data inherits that ownership.
COPY --chown=65532:65532 bin/rootfs/ /
COPY ${BINARY} /raftmq

# Every server flag can also be given as RAFTMQ_SERVER_<FLAG> in the
# environment; these are the in-container defaults. Per-node settings
# (RAFTMQ_SERVER_ID, RAFTMQ_SERVER_PEERS, RAFTMQ_SERVER_ADVERTISE, ...) come
# from docker-compose.yml or `docker run -e`.
# RAFTMQ_SERVERS is the -s default of the client commands, so that
# `docker exec <node> /raftmq status` talks to the node it runs in.
ENV RAFTMQ_SERVER_DATA=/data \
    RAFTMQ_SERVER_RAFT=0.0.0.0:7000 \
    RAFTMQ_SERVER_LISTEN=0.0.0.0:9000 \
    RAFTMQ_SERVER_HTTP=0.0.0.0:8000 \
    RAFTMQ_SERVERS=127.0.0.1:9000 \
    TMPDIR=/tmp

USER 65532:65532
WORKDIR /data
VOLUME ["/data"]

# 7000 raft transport (node to node only), 8000 HTTP (metrics, health),
# 9000 client gRPC API (the internal listener; compose adds an external one on 9100).
EXPOSE 7000 8000 9000 9100

# Healthy = the node answers on its client port and knows a leader. Exec form:
# scratch has no shell.
HEALTHCHECK --interval=5s --timeout=4s --start-period=30s --retries=3 \
    CMD ["/raftmq", "health", "-s", "127.0.0.1:9000"]

ENTRYPOINT ["/raftmq"]
CMD ["server"]
