// Second translation unit, so linked artifacts hold one fat binary blob per TU.
#include "hip_noheaders.h"

extern "C" __global__ void second(float *x) { x[__builtin_amdgcn_workitem_id_x()] += 1.0f; }
