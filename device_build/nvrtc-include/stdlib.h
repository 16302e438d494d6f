// NVRTC ships no C library headers; NCCL includes this but calls nothing from it on the device.
extern "C++" {
#include <cuda/std/cstdlib>
}
