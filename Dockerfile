# react-agent: the HTTP service (AG-UI over SSE, plain-JSON chat, the web UI at /).
#
#   docker build -t react-agent .
#   docker run -p 8000:8000 -v agent-data:/data \
#     -e OPENAI_API_KEY=... -e OPENAI_BASE_URL=... -e OPENAI_MODEL=... react-agent

# ---- web UI: built here, only the static assets go into the runtime image --------------
FROM node:22-slim AS web
WORKDIR /web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ ./
RUN npm run build

FROM python:3.11-slim AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOST=0.0.0.0 \
    PORT=8000 \
    AGENT_DB=/data/agent.sqlite \
    AGENT_REPORTS_DIR=/data/reports

RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/agent agent \
    && mkdir -p /data \
    && chown agent:agent /data

WORKDIR /srv/react-agent

# Dependencies first (a layer that survives source edits): install the project's
# requirements against an empty skeleton of its packages, pinned by constraints.txt.
COPY pyproject.toml constraints.txt README.md ./
RUN mkdir -p app/core app/http app/cli graphs tools/mcp prompts \
    && for pkg in app app/core app/http app/cli graphs tools tools/mcp prompts; do touch "$pkg/__init__.py"; done \
    && pip install -c constraints.txt . \
    && pip uninstall -y react-agent \
    && rm -rf app graphs tools prompts build ./*.egg-info

COPY app ./app
COPY graphs ./graphs
COPY tools ./tools
COPY prompts ./prompts
COPY --from=web /app/http/static ./app/http/static
RUN pip install --no-deps -c constraints.txt . && rm -rf build ./*.egg-info

USER agent
WORKDIR /home/agent
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; url = 'http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8000'); sys.exit(0 if urllib.request.urlopen(url, timeout=3).status == 200 else 1)"]

CMD ["react-agent", "serve", "--host", "0.0.0.0"]
