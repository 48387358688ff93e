# routegate: the admission webhook on top of the official HAProxy 3.x image, so `haproxy -c` checks
# configs with the same major version as a 3.x data plane. Not built in CI here (no container engine
# on the build machine): see docs/DEPLOY.md.
#
#   docker build -t ghcr.io/routegate/routegate:0.1.0 .
# Pinned to a patch release (the same 3.2.x the test suite's 3.x pass fetches from Debian); bump it
# together with that pass. No digest: pin one from your registry when you mirror the image.
FROM haproxy:3.2.26-bookworm

# The OCI image annotations registries and scanners read (opencontainers image-spec, annotations.md).
# version and revision are the build's: docker build --build-arg VERSION=... --build-arg REVISION=$(git rev-parse HEAD)
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="routegate" \
      org.opencontainers.image.description="Validating admission webhook and validation gate for HAProxy-based Gateway API routing" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/routegate/routegate" \
      org.opencontainers.image.documentation="https://github.com/routegate/routegate/blob/main/README.md" \
      org.opencontainers.image.base.name="docker.io/library/haproxy:3.2.26-bookworm"

USER root
# Debian bookworm's python3 is 3.11, routegate's minimum.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 routegate \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin routegate \
 && install -d -o 10001 -g 10001 -m 0700 /var/cache/routegate

WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY webhook ./webhook
COPY validators ./validators
COPY haproxy_check ./haproxy_check
COPY certs ./certs
# No [haproxy] extra: the image's own haproxy 3.x is used (ROUTEGATE_HAPROXY below). The constraints
# file pins every Python dependency to the versions the test suite ran with.
RUN python3 -m venv /opt/routegate \
 && /opt/routegate/bin/pip install --no-cache-dir --no-compile -c constraints.txt . \
 && rm -rf /src

ENV PATH=/opt/routegate/bin:$PATH \
    ROUTEGATE_HAPROXY=/usr/local/sbin/haproxy \
    XDG_CACHE_HOME=/var/cache/routegate \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /
USER 10001:10001
EXPOSE 8443 9090
# The haproxy base image stops with SIGUSR1; routegate stops gracefully on it and on SIGTERM alike.
STOPSIGNAL SIGTERM
ENTRYPOINT ["routegate", "serve"]
