// NVRTC ships no C library headers; NCCL's utility.h includes this, and in C++ bool is a keyword.
