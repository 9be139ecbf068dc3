// GGUF reader: any bytes either parse or throw qforge::Error (never crash, hang or read
// outside the file). What it accepts, GgufWriter writes back and the reader reads back
// the same: metadata in order with equal values, tensors with equal names, types, shapes
// and bytes. The model layer on top (config, tokenizer) must fail cleanly too.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "fuzz/fuzz_input_file.h"
#include "jit/base/error.h"
#include "model/format/gguf_reader.h"
#include "model/format/gguf_writer.h"
#include "model/format/model_file.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using qforge::fuzz::property_failed;

void check_round_trip(const qforge::GgufReader& in) {
  qforge::GgufWriter writer(in.alignment());
  for (const qforge::GgufKeyValue& kv : in.metadata())
    if (kv.key != "general.alignment") writer.add(kv.key, kv.value);
  for (const qforge::GgufTensorInfo& t : in.tensors()) {
    const auto data = in.raw_tensor_data(t);
    writer.add_tensor(t.name, t.type, {t.dims.begin(), t.dims.begin() + t.n_dims}, data);
  }
  const std::string path = qforge::fuzz::input_path("roundtrip.gguf");
  writer.write(path);
  const qforge::GgufReader out(path);
  if (out.metadata().size() != in.metadata().size()) property_failed("metadata count");
  for (std::size_t i = 0; i < in.metadata().size(); ++i) {
    const qforge::GgufKeyValue& a = in.metadata()[i];
    const qforge::GgufValue* b = out.find(a.key);
    if (b == nullptr || !(*b == a.value)) property_failed("metadata value");
  }
  if (out.tensors().size() != in.tensors().size()) property_failed("tensor count");
  for (const qforge::GgufTensorInfo& a : in.tensors()) {
    const qforge::GgufTensorInfo* b = out.find_tensor(a.name);
    if (b == nullptr || b->type != a.type || b->dims != a.dims || b->n_dims != a.n_dims)
      property_failed("tensor info");
    const auto x = in.raw_tensor_data(a), y = out.raw_tensor_data(*b);
    if (x.size() != y.size() || (x.size() > 0 && std::memcmp(x.data(), y.data(), x.size()) != 0))
      property_failed("tensor bytes");
  }
}

// Every typed getter on every key either returns or throws qforge::Error (a value of
// another type, out of range); each tensor is found by its name, a missing one is an error.
void check_getters(const qforge::GgufReader& in) {
  auto any = [](auto&& get) {
    try {
      get();
    } catch (const qforge::Error&) {
    }
  };
  for (const qforge::GgufKeyValue& kv : in.metadata()) {
    const std::string_view key = kv.key;
    any([&] { return in.get_u32(key); });
    any([&] { return in.get_u64(key); });
    any([&] { return in.get_i32(key); });
    any([&] { return in.get_i64(key); });
    any([&] { return in.get_f32(key); });
    any([&] { return in.get_f64(key); });
    any([&] { return in.get_bool(key); });
    any([&] { return in.get_string(key).size(); });
    any([&] { return in.get_string_array(key).size(); });
    any([&] { return in.get_f32_array(key).size(); });
    any([&] { return in.get_i32_array(key).size(); });
    any([&] { return in.get_array_size(key); });
  }
  for (const qforge::GgufTensorInfo& t : in.tensors())
    if (in.tensor(t.name).name != t.name) property_failed("a tensor is not found by its name");
  try {
    in.tensor("no such tensor \x01");
    property_failed("a missing tensor was found");
  } catch (const qforge::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = qforge::fuzz::write_input("input.gguf", data, size);
  try {
    const qforge::GgufReader reader(path);
    for (const qforge::GgufTensorInfo& t : reader.tensors()) {
      const auto bytes = reader.raw_tensor_data(t);
      if (!bytes.empty() && (bytes.data() < reader.file_data() ||
                             bytes.data() + bytes.size() > reader.file_data() + reader.file_size()))
        property_failed("tensor data outside the file");
    }
    try {
      const qforge::Tokenizer tokenizer = qforge::Tokenizer::from_gguf(reader);
      const auto ids = tokenizer.encode("Hello world <s> 123", true, false, true);
      for (std::size_t i = 0; i < ids.size(); ++i) tokenizer.decode(i ? ids[i - 1] : -1, ids[i]);
    } catch (const qforge::Error&) {
    }
    check_getters(reader);
    check_round_trip(reader);
  } catch (const qforge::Error&) {
  }
  try {
    // The layer above: config, tensor views, and the first and last row of each small
    // tensor decoded (every ggml block type's decoder).
    const qforge::ModelFile model = qforge::open_model(path);
    std::vector<float> row;
    for (const qforge::TensorView& t : model.tensors()) {
      if (t.columns <= 0 || t.columns > 4096 || t.rows <= 0) continue;
      row.resize(static_cast<std::size_t>(t.columns));
      t.row_to_f32(0, row);
      t.row_to_f32(t.rows - 1, row);
    }
  } catch (const qforge::Error&) {
  }
  return 0;
}
