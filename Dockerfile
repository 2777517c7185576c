# Lore as a container, with the Postgres backend installed. It serves MCP over stdio
# (`docker run -i --rm -v lore:/data lore-memory`); see docker-compose.yml for Postgres.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    LORE_DB_PATH=/data/lore.db

WORKDIR /app
# CPU-only torch first, so sentence-transformers does not pull gigabytes of CUDA builds.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY lore_mcp ./lore_mcp
COPY stores ./stores
RUN pip install '.[postgres]' && useradd --create-home --uid 10001 lore && mkdir -p /data && chown lore /data

USER lore
VOLUME ["/data"]
ENTRYPOINT ["lore-memory"]
CMD ["mcp"]
