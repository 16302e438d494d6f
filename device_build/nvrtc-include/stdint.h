// NVRTC ships no C library headers; NCCL's utility.h and ptr.h include this for int32_t & co.
// extern "C++": nccl.h includes C headers inside extern "C", and libcu++ is C++.
extern "C++" {
#include <cuda/std/cstdint>
}
