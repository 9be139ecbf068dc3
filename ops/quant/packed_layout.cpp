#include "ops/quant/packed_layout.h"

#include "jit/base/aligned_buffer.h"
#include "jit/base/error.h"

namespace qforge {

PackedHeader make_packed_header(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                bool interleaved_pair) {
  validate(scheme);
  QF_REQUIRE(n > 0, "packed weights: N must be positive, got ", n);
  QF_REQUIRE(k > 0, "packed weights: K must be positive, got ", k);
  QF_REQUIRE(n <= (std::int64_t{1} << 31) && k <= (std::int64_t{1} << 31),
             "packed weights: N = ", n, ", K = ", k, " is too large");
  PackedHeader h;
  h.bits = static_cast<std::uint8_t>(scheme.bits);
  h.asymmetric = scheme.asymmetric;
  h.granularity = static_cast<std::uint8_t>(scheme.granularity);
  h.interleaved_pair = interleaved_pair;
  h.superblock_groups = static_cast<std::uint16_t>(scheme.superblock_groups());
  h.n = n;
  h.k = k;
  if (scheme.granularity == Granularity::per_group) {
    h.group = scheme.group;
    h.k_padded = static_cast<std::int64_t>(
        round_up(k, scheme.two_level() ? scheme.superblock : scheme.group));
  } else {
    h.k_padded = static_cast<std::int64_t>(round_up(k, kPerChannelKAlign));
    h.group = h.k_padded;
    QF_REQUIRE(h.group <= kMaxGroup, "packed weights: per-channel K = ", k, " exceeds ", kMaxGroup,
               " (int32 accumulator bound); use per-group quantization");
  }
  const std::int64_t panels_per_half = (n + kPanelWidth - 1) / kPanelWidth;
  h.n_padded = panels_per_half * kPanelWidth * (interleaved_pair ? 2 : 1);
  h.total_bytes = geometry_of(h).total_bytes;
  return h;
}

PackedGeometry geometry_of(const PackedHeader& h) {
  PackedGeometry g;
  g.panels = h.n_padded / kPanelWidth;
  g.groups = h.k_padded / h.group;
  g.rows_per_group = h.group * panel_bytes_per_k(h.bits) / kRowBytes;
  g.group_data_bytes = g.rows_per_group * kRowBytes;
  g.superblock_groups = h.superblock_groups;
  if (g.superblock_groups == 0) {
    g.trailer_bytes = h.asymmetric ? kTrailerBytesAsymmetric : kTrailerBytesSymmetric;
  } else {
    g.trailer_bytes = kTrailerBytesTwoLevel;
    g.super_header_bytes = h.asymmetric ? kSuperHeaderBytesAsymmetric : kSuperHeaderBytesSymmetric;
  }
  g.group_bytes = g.group_data_bytes + g.trailer_bytes;
  g.panel_bytes = g.group_bytes * g.groups +
                  (g.superblock_groups ? g.groups / g.superblock_groups : 0) * g.super_header_bytes;
  g.total_bytes = g.panel_bytes * g.panels;
  return g;
}

QuantScheme scheme_of(const PackedHeader& h) {
  QuantScheme s;
  s.bits = h.bits;
  s.asymmetric = h.asymmetric != 0;
  s.granularity = static_cast<Granularity>(h.granularity);
  s.group = s.granularity == Granularity::per_group ? static_cast<int>(h.group) : 0;
  s.superblock = s.group * h.superblock_groups;
  return s;
}

void validate(const PackedHeader& h, const char* what) {
  QF_REQUIRE(h.magic == kPackedMagic, what, ": bad magic 0x", std::hex, h.magic);
  QF_REQUIRE(h.version == kPackedLayoutVersion, what, ": layout version ", h.version,
             " (this build reads ", kPackedLayoutVersion, ")");
  QF_REQUIRE(h.granularity <= static_cast<int>(Granularity::per_group), what,
             ": field 'granularity' = ", int{h.granularity}, " is invalid");
  const QuantScheme scheme = scheme_of(h);
  const PackedHeader expected = make_packed_header(h.n, h.k, scheme, h.interleaved_pair != 0);
  QF_REQUIRE(expected.k_padded == h.k_padded && expected.n_padded == h.n_padded &&
                 expected.group == h.group && expected.total_bytes == h.total_bytes &&
                 expected.superblock_groups == h.superblock_groups,
             what, ": header sizes are inconsistent (N ", h.n, ", K ", h.k, ", g ", h.group, ")");
}

}  // namespace qforge
