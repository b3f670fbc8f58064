# forgehand's own image: the daemon (the sandbox images' Dockerfiles and the
# prompts built in), its static text-editor MCP server and the default
# configuration.
#
#   docker build --network host -t forgehand:latest .
#
# Stages: `runtime` (everything but the two binaries) comes first so that
# `--target runtime` builds it alone, even with the classic builder; the
# test setup (scripts/build-daemon-image --binaries DIR) puts binaries it
# has already compiled on top of it instead of compiling them again.
#
# BASE_IMAGE is Debian bookworm (the published debian:bookworm-slim, or the
# one scripts/dev-env.sh makes locally); its bookworm-security suite carries
# the Rust toolchain the build needs (rust-version in Cargo.toml).
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
# ca-certificates for TLS to the forges and model providers; libssl3 for
# libgit2's HTTPS. git itself is linked in (libgit2), so no git command.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 forgehand \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/forgehand --shell /usr/sbin/nologin forgehand \
 && install -d -o forgehand -g forgehand /var/lib/forgehand /var/lib/forgehand/state
# The default configuration, every key documented, with the state kept in
# /var/lib/forgehand/state (mount a volume there). Mount your own file at
# /etc/forgehand/config.yaml and point FORGEHAND_CONFIG at it.
COPY config.yaml /usr/share/forgehand/config.yaml
RUN sed -i 's|^  state_dir: "state"$|  state_dir: "/var/lib/forgehand/state"|' /usr/share/forgehand/config.yaml \
 && grep -q '^  state_dir: "/var/lib/forgehand/state"$' /usr/share/forgehand/config.yaml
ENV FORGEHAND_CONFIG=/usr/share/forgehand/config.yaml
LABEL org.opencontainers.image.title="forgehand" \
      org.opencontainers.image.description="Turns labelled GitHub/GitLab issues into draft PRs/MRs"
USER 10001:10001
WORKDIR /var/lib/forgehand
VOLUME /var/lib/forgehand/state
EXPOSE 9464
ENTRYPOINT ["forgehand"]
CMD ["run"]

FROM ${BASE_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
# Behind a TLS-inspecting proxy, pass its CA certificates (PEM) so cargo can
# fetch crates: --build-arg EXTRA_CA_CERTS="$(cat /usr/local/share/ca-certificates/*.crt)".
# They are trusted in this build stage only, not in the image.
ARG EXTRA_CA_CERTS=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends rustc-web cargo-web gcc g++ libc6-dev make perl pkg-config libssl-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && if [ -n "$EXTRA_CA_CERTS" ]; then printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/build-extra.crt && update-ca-certificates; fi
WORKDIR /src
# Dependencies first, so a source change does not download them again.
COPY Cargo.toml Cargo.lock build.rs ./
COPY crates crates
COPY src src
COPY benches benches
COPY tests tests
# Built into the binary: the prompts, the sandbox images' Dockerfiles and
# the model catalogue.
COPY prompts prompts
COPY images images
COPY catalogue catalogue
RUN cargo fetch --locked
# The daemon, then the editor linked statically (it runs in every sandbox,
# whatever libc the sandbox image has), both stripped.
RUN RUSTFLAGS="-C strip=symbols" cargo build --locked --release --bin forgehand \
 && RUSTFLAGS="-C target-feature=+crt-static -C strip=symbols" cargo build --locked --release \
      --package forgehand-editor --bin forgehand-editor --target "$(rustc -vV | sed -n 's/^host: //p')" \
 && install -D target/release/forgehand /out/forgehand \
 && install -D target/*/release/forgehand-editor /out/forgehand-editor \
 && /out/forgehand --version

FROM runtime
COPY --from=build /out/forgehand /out/forgehand-editor /usr/local/bin/
