"""moesweep simulated GPU host: SGLang-compatible server, nvidia-smi, nvcc (stdlib only)."""
