"""Names a generated OpenCL C identifier must never take: the language's words, its types, its builtins.

Tensor and stage names are user text and become C names (buffers, kernels, locals).  A stage
called ``exp2`` or ``int`` must not shadow a builtin or a type: the OpenCL compiler either rejects
the program or, worse for a kernel name, drops the kernel.  The lists follow the OpenCL C 1.2
specification (sections 6.1 types, 6.1.9 keywords, 6.12 built-in functions, 6.10 preprocessor);
the patterns cover the families the lists would repeat (``float4``, ``convert_int8_sat``,
``as_uint2``, ``vload_half4``, ``FLT_MAX``, reserved ``__names``).
"""

import re

# C99 and OpenCL C keywords, qualifiers and reserved type names
_KEYWORDS = """
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Imaginary bool uchar ushort uint ulong half quad complex imaginary size_t ptrdiff_t intptr_t
uintptr_t event_t sampler_t image1d_t image1d_array_t image1d_buffer_t image2d_t image2d_array_t image3d_t
image2d_depth_t image2d_array_depth_t kernel __kernel global __global local __local constant __constant
private __private read_only __read_only write_only __write_only read_write __read_write attribute
__attribute__ true false NULL cl_mem_fence_flags vec_type_hint reqd_work_group_size work_group_size_hint
""".split()

# built-in functions of OpenCL C 1.2 (math, integer, common, geometric, relational, synchronisation,
# work-item, vector data, async copies, atomics, images, misc) and the macros PoCL headers define
_BUILTINS = """
acos acosh acospi asin asinh asinpi atan atan2 atanh atanpi atan2pi cbrt ceil copysign cos cosh cospi erfc
erf exp exp2 exp10 expm1 fabs fdim floor fma fmax fmin fmod fract frexp hypot ilogb ldexp lgamma lgamma_r
log log2 log10 log1p logb mad maxmag minmag modf nan nextafter pow pown powr remainder remquo rint rootn
round rsqrt sin sincos sinh sinpi sqrt tan tanh tanpi tgamma trunc
abs abs_diff add_sat hadd rhadd clamp clz ctz mad_hi mad_sat max min mul_hi rotate sub_sat upsample
popcount mad24 mul24 degrees mix radians step smoothstep sign cross dot distance length normalize
fast_distance fast_length fast_normalize isequal isnotequal isgreater isgreaterequal isless islessequal
islessgreater isfinite isinf isnan isnormal isordered isunordered signbit any all bitselect select
barrier mem_fence read_mem_fence write_mem_fence get_work_dim get_global_size get_global_id
get_local_size get_local_id get_num_groups get_group_id get_global_offset vload vstore
async_work_group_copy async_work_group_strided_copy wait_group_events prefetch shuffle shuffle2 vec_step
printf INFINITY NAN HUGE_VAL HUGE_VALF MAXFLOAT assert main
""".split()

_PATTERNS = re.compile(
    r"""(?x)
    (?:char|uchar|short|ushort|int|uint|long|ulong|float|double|half|bool)(?:2|3|4|8|16)   # vector types
    | (?:convert|as)_\w+                        # conversions and reinterpretations
    | (?:vload|vstore|vloada|vstorea)(?:_half)?\d*(?:_\w+)?   # vector data loads and stores
    | (?:native|half)_\w+                       # native_exp, half_sqrt, ...
    | (?:atomic|atom)_\w+                       # atomics
    | (?:read|write)_image\w*  | get_image_\w+  # images
    | (?:work_group|sub_group)_\w+              # work-group functions (OpenCL 2)
    | (?:M|FLT|DBL|HALF|CL|CLK|CHAR|SCHAR|UCHAR|SHRT|USHRT|INT|UINT|LONG|ULONG|FP)_[A-Z0-9_]*   # macros
    | __\w* | _[A-Z]\w*                         # reserved for the implementation (C99 7.1.3)
    """
)

RESERVED = frozenset(_KEYWORDS) | frozenset(_BUILTINS)


def is_reserved(name):
    """True when ``name`` is an OpenCL C keyword, type, builtin or predefined macro (or of their families)."""
    return name in RESERVED or _PATTERNS.fullmatch(name) is not None
