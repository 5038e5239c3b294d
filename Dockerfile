# Compile Lab on a GPU box: torch with CUDA, the app on port 8501, everything it keeps in /data.
#
#   docker build -t compile-lab .
#   docker run --gpus all -p 8501:8501 -v compile-lab-data:/data \
#       -e COMPILE_LAB_ADMIN_TOKEN=... -e COMPILE_LAB_MAX_BATCH_SIZE=256 compile-lab
#
# or `docker compose -f deploy/compose.yaml up -d` (see the README's "Host it").
# The host needs an NVIDIA driver and the NVIDIA Container Toolkit; without a GPU the same image
# races on the CPU.
FROM python:3.12-slim

# g++: Inductor compiles C++ for races on the CPU, and Triton builds its launcher with it on the GPU.
# tini: PID 1 reaps the worker processes the app starts in their own sessions.
# curl: the health check.
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ tini curl \
    && rm -rf /var/lib/apt/lists/*

# torch and torchvision built against CUDA (the wheel index names the CUDA version), then the rest,
# timm and transformers included so the host limits may allow timm:<name> and hf:<name> models
# (they find this torch already installed and keep it).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu124
WORKDIR /app
COPY requirements.txt requirements-models.txt ./
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" torch torchvision \
    && pip install --no-cache-dir -r requirements.txt -r requirements-models.txt

COPY . .
RUN useradd --create-home --uid 1000 lab && mkdir -p /data && chown lab:lab /data
USER lab

# The store, worker logs and warm Inductor caches live in /data: a volume, so a new image keeps them.
# No file watcher on a box that does not edit its code (each new session would scan every module);
# uploads no larger than the largest bundle Compile Lab imports (64 MiB); and an error that escapes
# the app's own messages shows visitors a generic line, never its traceback or the server's paths
# (those go to the container's log).
ENV COMPILE_LAB_DATA=/data \
    STREAMLIT_SERVER_PORT=8501 \
    STREAMLIT_SERVER_ADDRESS=0.0.0.0 \
    STREAMLIT_SERVER_HEADLESS=true \
    STREAMLIT_SERVER_FILE_WATCHER_TYPE=none \
    STREAMLIT_SERVER_MAX_UPLOAD_SIZE=64 \
    STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=none \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
VOLUME ["/data"]
EXPOSE 8501

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD curl --fail --silent --show-error http://127.0.0.1:8501/_stcore/health || exit 1

ENTRYPOINT ["tini", "--"]
CMD ["python", "-m", "streamlit", "run", "app.py"]
