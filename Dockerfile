# Lore as a container, with the Postgres backend installed. By default it is the team server:
# MCP streamable HTTP on port 8765 (`/mcp`, API keys) with `GET /healthz`; see
# docker-compose.yml. For a stdio server instead: `docker run -i --rm -v lore:/data IMAGE mcp`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    LORE_DB_PATH=/data/lore.db

WORKDIR /app
# The distribution is lore-memory-mcp (the built-in model runs on ONNX Runtime: no torch); its
# `lore-memory` command is the entry point.
COPY pyproject.toml README.md ./
COPY lore_mcp ./lore_mcp
COPY stores ./stores
RUN pip install '.[postgres]' && useradd --create-home --uid 10001 lore && mkdir -p /data && chown lore /data

USER lore
VOLUME ["/data"]
EXPOSE 8765
# The image has no curl; Python's standard library does the health check.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=4)"]
# SIGTERM drains: requests in flight finish, then the server exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["lore-memory"]
CMD ["mcp", "--transport", "http", "--host", "0.0.0.0", "--port", "8765"]
