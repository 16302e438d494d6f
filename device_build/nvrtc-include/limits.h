// NVRTC ships no C library headers; nccl.h uses INT_MIN and INT_MAX.
extern "C++" {
#include <cuda/std/climits>
}
