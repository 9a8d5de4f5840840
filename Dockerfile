# Nereid, CPU image.
#   docker build -t nereid .
#   docker run --rm -p 8000-8002:8000-8002 -v "$PWD/examples/model_repository:/models:ro" nereid
# Ports are Triton's: 8000 HTTP (KServe v2, and the web console at /console), 8001 gRPC, 8002 Prometheus metrics.
# The model repository is the /models volume. Logs are JSON lines (no terminal); `docker run -t` gives formatted ones.
# No Python in this image: it serves onnxruntime models. Python and PyTorch models need python3 with numpy (and
# torch) added in an image built from this one; TensorRT plans need the GPU image (docs/operating.md).
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY . .
# The same script CI runs: build, npm pack, install the tarball's production dependencies into /opt/nereid.
RUN bash deploy/docker/install.sh /opt/nereid

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    PATH=/opt/nereid/bin:$PATH
COPY --from=build /opt/nereid /opt/nereid
# A fixed non-root uid, so a volume's ownership and a Kubernetes securityContext can name it.
RUN groupadd --system --gid 10001 nereid \
    && useradd --system --uid 10001 --gid nereid --home-dir /home/nereid --create-home --shell /usr/sbin/nologin nereid
USER 10001:10001
WORKDIR /home/nereid
VOLUME ["/models"]
EXPOSE 8000 8001 8002
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s \
    CMD ["node", "-e", "fetch('http://127.0.0.1:8000/v2/health/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# `docker run IMAGE serve --model-repository=/models --log-verbose=1`, or `docker run IMAGE gpu check`.
ENTRYPOINT ["nereid"]
CMD ["serve", "--model-repository=/models"]
