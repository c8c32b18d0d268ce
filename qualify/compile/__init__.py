"""Stage 20, compile: per-kernel resources from AMDGPU, CUDA and host binaries, the kernel-resources kind."""
