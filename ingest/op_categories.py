"""What an operator or a kernel computes: one category each, from a declared table of names.

Operators are named by the framework (``aten::addmm``, ``AddmmBackward0``) or by a vendor's operator library
(``npu_fusion_attention``, Ascend op types such as ``MatMulV2``); kernels by whoever wrote them
(``cutlass_80_tensorop_...gemm``, rocBLAS/Tensile ``Cijk_...``, ``triton_poi_fused_...``). A kernel is put in a
category by its name when its name says (`kernel_category`), else it takes its operator's; an operator by its
name (`operator_category`). The tables are data: add a name, not a branch.
"""

from __future__ import annotations

import enum
import re
from functools import lru_cache

__all__ = ["OpCategory", "is_communication", "kernel_category", "operator_category"]


class OpCategory(enum.Enum):
    """What an operator computes, as a port's engineer groups device time."""

    GEMM = "GEMM"
    ATTENTION = "attention"
    CONVOLUTION = "convolution"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    NORMALIZATION = "normalization"
    COPY = "copy"
    COMMUNICATION = "communication"
    OTHER = "other"


# Operator base names (namespace, trailing "_" of in-place variants, "Backward<N>" and "_backward" removed, lower
# case) by category.
_OPERATORS: dict[OpCategory, frozenset[str]] = {
    OpCategory.GEMM: frozenset(
        "mm bmm addmm addmv addbmm baddbmm matmul linear mv dot vdot einsum _scaled_mm _int_mm _addmm_activation "
        "npu_linear npu_quant_matmul npu_weight_quant_batchmatmul npu_grouped_matmul matmulv2 matmulv3 batchmatmul "
        "batchmatmulv2 gemm gemmv2 fully_connection fullyconnection quantbatchmatmul quantbatchmatmulv3 "
        "weightquantbatchmatmulv2 groupedmatmul".split()),
    OpCategory.ATTENTION: frozenset(
        "scaled_dot_product_attention _scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
        "_scaled_dot_product_cudnn_attention _scaled_dot_product_attention_math _scaled_dot_product_flash_attention_for_cpu "
        "_scaled_dot_product_fused_attention_overrideable _flash_attention_forward _efficient_attention_forward "
        "_fused_sdp_choice flash_attn_func flash_attn_varlen_func _flash_attn_forward _flash_attn_varlen_forward "
        "multi_head_attention_forward _native_multi_head_attention _masked_softmax npu_fusion_attention "
        "npu_prompt_flash_attention npu_incre_flash_attention npu_fused_infer_attention_score flashattentionscore "
        "promptflashattention increflashattention fusedinferattentionscore paged_attention".split()),
    OpCategory.CONVOLUTION: frozenset(
        "conv1d conv2d conv3d convolution _convolution convolution_overrideable cudnn_convolution miopen_convolution "
        "mkldnn_convolution _slow_conv2d slow_conv3d slow_conv_dilated2d slow_conv_dilated3d thnn_conv2d "
        "_nnpack_spatial_convolution conv_transpose1d conv_transpose2d conv_transpose3d cudnn_convolution_transpose "
        "miopen_convolution_transpose miopen_depthwise_convolution _conv_depthwise2d conv_depthwise3d "
        "cudnn_convolution_relu cudnn_convolution_add_relu conv2dbackpropinput conv2dbackpropfilter conv3d "
        "conv2dtranspose npu_convolution".split()),
    OpCategory.NORMALIZATION: frozenset(
        "layer_norm native_layer_norm group_norm native_group_norm batch_norm native_batch_norm _batch_norm_impl_index "
        "_native_batch_norm_legit _native_batch_norm_legit_no_training cudnn_batch_norm miopen_batch_norm "
        "instance_norm rms_norm _fused_rms_norm npu_rms_norm npu_add_rms_norm layernorm layernormv3 rmsnorm addrmsnorm "
        "batchnorm bninfer bntrainingreduce bntrainingupdate local_response_norm normalize".split()),
    OpCategory.REDUCTION: frozenset(
        "sum mean max min amax amin aminmax argmax argmin prod norm linalg_vector_norm frobenius_norm std var var_mean "
        "std_mean softmax _softmax log_softmax _log_softmax logsumexp cumsum cumprod topk sort argsort all any "
        "nll_loss nll_loss_nd nll_loss2d cross_entropy cross_entropy_loss mse_loss l1_loss smooth_l1_loss "
        "binary_cross_entropy binary_cross_entropy_with_logits kl_div count_nonzero median mode unique "
        "_unique2 reducesum reducemean reducemax reducemin softmaxv2 logsoftmaxv2 argmaxv2 topkv2".split()),
    OpCategory.COPY: frozenset(
        "copy _to_copy to clone contiguous cat concat stack _pin_memory pin_memory _copy_from _copy_from_and_resize "
        "index_copy narrow_copy pad constant_pad_nd repeat tile transpose_copy permute_copy _unsafe_view_copy "
        "copy_to_device npu_format_cast transdata concatd concatv2 identity memcpy tensormove".split()),
    OpCategory.COMMUNICATION: frozenset(
        "allreduce all_reduce allgather all_gather all_gather_into_tensor _allgather_base reduce_scatter "
        "reduce_scatter_tensor _reduce_scatter_base broadcast all_to_all alltoall alltoall_base all_to_all_single "
        "send recv isend irecv barrier record_param_comms hcomallreduce hcomallgather "
        "hcomreducescatter hcombroadcast hcomsend hcomreceive".split()),
    OpCategory.ELEMENTWISE: frozenset(
        "add sub mul div true_divide floor_divide remainder fmod pow neg abs sign sqrt rsqrt exp exp2 expm1 log log2 "
        "log10 log1p sin cos tan tanh sinh cosh sigmoid relu relu6 gelu silu mish elu selu celu leaky_relu hardtanh "
        "hardswish hardsigmoid softplus threshold clamp clamp_min clamp_max clip where masked_fill masked_scatter "
        "dropout native_dropout feature_dropout fill zero zeros ones full eq ne lt le gt ge logical_and logical_or "
        "logical_not logical_xor bitwise_and bitwise_or bitwise_not bitwise_xor erf erfc erfinv reciprocal square "
        "lerp addcmul addcdiv maximum minimum nan_to_num rsub floor ceil round trunc frac uniform normal bernoulli "
        "rand randn randint random exponential _foreach_add _foreach_mul _foreach_div _foreach_sub _foreach_addcmul "
        "_foreach_addcdiv _foreach_sqrt _foreach_lerp _foreach_norm _fused_adam _fused_adamw glu swiglu isnan "
        "isinf isfinite triu tril sigmoid_backward tanh_backward gelu_backward silu_backward npu_swiglu "
        "npu_rotary_mul npu_dropout_with_add_softmax apply_rotary_pos_emb realdiv mul adds muls cast addn "
        "fastgelu fastgeluv2 swish swishgrad".split()),
}
_BY_NAME: dict[str, OpCategory] = {name: category for category, names in _OPERATORS.items() for name in names}

# Kernel names: the first pattern that matches decides (order matters: a convolution's implicit GEMM is a
# convolution, a fused attention's GEMM is attention). Names no pattern matches take their operator's category.
_KERNELS: list[tuple[OpCategory, re.Pattern[str]]] = [
    (OpCategory.COPY, re.compile(r"^(memcpy|memset)\b|^(cuda|hip)?memcpy|catarraybatchedcopy|copy_kernel", re.I)),
    (OpCategory.COMMUNICATION, re.compile(r"nccl|rccl|hccl|hcom|gloo|c10d|all_?reduce|all_?gather|reduce_?scatter|"
                                           r"all_?to_?all|sendrecv|cross_device_reduce", re.I)),
    (OpCategory.ATTENTION, re.compile(r"flash|fmha|attn|attention|sdpa", re.I)),
    (OpCategory.CONVOLUTION, re.compile(r"conv(?!ert)|fprop|dgrad|wgrad|implicit_?gemm|igemm_(fwd|bwd|wrw)|winograd|fft2d|im2col|"
                                        r"scudnn|miopen", re.I)),
    (OpCategory.GEMM, re.compile(r"(?<!fb)gemm|gemv|^cijk_|cublas|hipblas|matmul|nvjet|xmma|triton_tem_fused_.*mm|"
                                 r"^triton_.*_(mm|bmm|addmm)(_|$)|wmma|splitk", re.I)),
    (OpCategory.NORMALIZATION, re.compile(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm", re.I)),
    (OpCategory.REDUCTION, re.compile(r"reduce_kernel|reduce|softmax|^triton_(red|per)_|argmax|topk|radixsort|"
                                      r"cub::device(reduce|scan|segmented)", re.I)),
    (OpCategory.ELEMENTWISE, re.compile(r"elementwise|^triton_poi_|unrolled_elementwise|vectorized_|fill_kernel|"
                                        r"distribution_elementwise|dropout|multi_tensor_apply", re.I)),
]

_NAMESPACE = re.compile(r"^(?:[a-z_0-9]+::)+", re.I)  # aten::, c10d::, torch_npu::, npu::
_OVERLOAD = re.compile(r"\.[A-Za-z_0-9]+$")  # aten::add.Tensor, aten::mm.out
_OPERATOR_NAMED = re.compile(r"^(?:[a-z_0-9]+::)+[A-Za-z_0-9.]+$")  # a predicted kernel named after its operator
_BACKWARD = re.compile(r"backward\d*$", re.I)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _bases(name: str) -> tuple[str, str]:
    """An operator's base name (no namespace, no autograd wrapper, no backward suffix, no in-place "_"), lower
    case as written and in snake case (``NativeLayerNormBackward0`` -> ``native_layer_norm``)."""
    name = name.strip()
    if ": " in name:  # "autograd::engine::evaluate_function: AddmmBackward0" -> the function it runs
        name = name.rsplit(": ", 1)[1]
    name = _OVERLOAD.sub("", _NAMESPACE.sub("", name))
    name = _BACKWARD.sub("", name).rstrip("_")
    if name.endswith("_backward"):
        name = name[: -len("_backward")]
    return name.lower(), _CAMEL.sub("_", name).lower()


@lru_cache(maxsize=65536)
def operator_category(name: str) -> OpCategory:
    """The category of an operator by its name (``aten::addmm`` -> GEMM, ``AddmmBackward0`` -> GEMM,
    ``c10d::allreduce_`` -> communication); OTHER when the table does not know it."""
    if name.lstrip().startswith("c10d::"):  # the distributed namespace (c10d::gather_; aten::gather is no collective)
        return OpCategory.COMMUNICATION
    for base in _bases(name):
        for candidate in (base, base.lstrip("_"), base.removeprefix("npu_")):
            if (found := _BY_NAME.get(candidate)) is not None:
                return found
    return OpCategory.OTHER


def is_communication(name: str) -> bool:
    """A collective or point-to-point transfer between devices, by an operator's or a kernel's name (``nccl:...``,
    ``hcom_allReduce_``, ``gloo:all_reduce``, ``c10d::broadcast_``): its time is mostly waiting on peers."""
    return operator_category(name) is OpCategory.COMMUNICATION or kernel_category(name) is OpCategory.COMMUNICATION


@lru_cache(maxsize=65536)
def kernel_category(name: str) -> OpCategory | None:
    """The category a kernel's, copy's or memset's name says it is, None when its name does not say (then its
    operator's category holds)."""
    for category, pattern in _KERNELS:
        if pattern.search(name):
            return category
    if _OPERATOR_NAMED.match(name) and (by_operator := operator_category(name)) is not OpCategory.OTHER:
        return by_operator
    return None
