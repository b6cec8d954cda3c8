// A pickle reader for what torch.save writes (protocols 2 to 5, the opcodes CPython's pickler
// emits for dicts, lists, tuples, numbers, strings, tensors and NumPy arrays) and a writer through
// libtorch's Pickler with its type tags off. Why not torch::pickle_load / pickle_save: see the header.
#include "checkpoint/python_pickle.h"

#include <ATen/Functions.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <acc/errors.h>

#include "checkpoint/checksums.h"

namespace acc::detail {
namespace {

[[noreturn]] void malformed(const std::string& path, const std::string& what) {
  throw CheckpointError("acc: '" + path + "' is not a torch.save file acc can read (" + what +
                        "); it must be what Python's torch.save or Accelerate's save_state wrote");
}

// A Python global (module.name) or an object made by calling one, while the pickle runs.
constexpr const char* kGlobal = "\x01global";
constexpr const char* kObject = "\x01object";

c10::IValue marker(const char* kind, const std::string& name, c10::IValue payload = c10::IValue()) {
  return c10::ivalue::Tuple::create({c10::IValue(std::string(kind)), c10::IValue(name), std::move(payload)});
}
bool is_marker(const c10::IValue& value, const char* kind) {
  if (!value.isTuple()) return false;
  const auto& items = value.toTupleRef().elements();
  return items.size() == 3 && items[0].isString() && items[0].toStringRef() == kind;
}
std::string marker_name(const c10::IValue& value) { return value.toTupleRef().elements()[1].toStringRef(); }

// torch.FloatStorage etc. (and NumPy's dtype codes) to ATen dtypes.
std::optional<at::ScalarType> storage_dtype(const std::string& name) {
  static const std::map<std::string, at::ScalarType> table{
      {"torch.DoubleStorage", at::kDouble},   {"torch.FloatStorage", at::kFloat},
      {"torch.HalfStorage", at::kHalf},       {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},       {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},     {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},       {"torch.BoolStorage", at::kBool},
      {"torch.ComplexFloatStorage", at::kComplexFloat}, {"torch.ComplexDoubleStorage", at::kComplexDouble},
      {"torch.UntypedStorage", at::kByte}};
  auto found = table.find(name);
  if (found == table.end()) return std::nullopt;
  return found->second;
}
std::optional<at::ScalarType> numpy_dtype(const std::string& code) {
  static const std::map<std::string, at::ScalarType> table{
      {"u1", at::kByte}, {"i1", at::kChar}, {"i2", at::kShort}, {"i4", at::kInt}, {"i8", at::kLong},
      {"u4", at::kLong} /* widened: ATen's uint32 has few kernels */, {"f4", at::kFloat}, {"f8", at::kDouble},
      {"b1", at::kBool}};
  auto found = table.find(code);
  if (found == table.end()) return std::nullopt;
  return found->second;
}

class Reader {
 public:
  Reader(std::string path, const std::string& bytes) : path_(std::move(path)), pickle_(bytes) {}
  std::function<at::Tensor(const std::string& key, at::ScalarType dtype, int64_t numel)> storage;

  c10::IValue run() {
    for (;;) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;                   // PROTO
        case 0x95: skip(8); break;                  // FRAME
        case '.': return pop();                     // STOP
        case '(': marks_.push_back(stack_.size()); break;  // MARK
        case '0': pop(); break;                     // POP
        case '1': pop_mark(); break;                // POP_MARK
        case '2': push(top()); break;               // DUP
        case 'N': push(c10::IValue()); break;       // NONE
        case 0x88: push(true); break;               // NEWTRUE
        case 0x89: push(false); break;              // NEWFALSE
        case 'J': push(int64_t(little<int32_t>())); break;     // BININT
        case 'K': push(int64_t(byte())); break;                 // BININT1
        case 'M': push(int64_t(little<uint16_t>())); break;     // BININT2
        case 0x8a: push(long_int(byte())); break;                // LONG1
        case 0x8b: push(long_int(little<uint32_t>())); break;    // LONG4
        case 'G': push(big_endian_double()); break;              // BINFLOAT
        case 'X': push(text(little<uint32_t>())); break;         // BINUNICODE
        case 0x8c: push(text(byte())); break;                    // SHORT_BINUNICODE
        case 0x8d: push(text(little<uint64_t>())); break;        // BINUNICODE8
        case 'B': push(text(little<uint32_t>())); break;         // BINBYTES
        case 'C': push(text(byte())); break;                     // SHORT_BINBYTES
        case 0x8e: push(text(little<uint64_t>())); break;        // BINBYTES8
        case 'T': push(text(little<uint32_t>())); break;         // BINSTRING
        case 'U': push(text(byte())); break;                     // SHORT_BINSTRING
        case '}': push(python_dict()); break;                    // EMPTY_DICT
        case ']': push(python_list()); break;                    // EMPTY_LIST
        case ')': push(c10::ivalue::Tuple::create({})); break;   // EMPTY_TUPLE
        case 0x85: tuple(1); break;                              // TUPLE1
        case 0x86: tuple(2); break;                              // TUPLE2
        case 0x87: tuple(3); break;                              // TUPLE3
        case 't': {                                              // TUPLE
          auto items = pop_mark();
          push(c10::ivalue::Tuple::create(std::move(items)));
        } break;
        case 'l': {                                              // LIST
          auto list = python_list();
          for (auto& item : pop_mark()) list.push_back(std::move(item));
          push(list);
        } break;
        case 'd': {                                              // DICT
          auto items = pop_mark();
          auto dict = python_dict();
          for (size_t i = 0; i + 1 < items.size(); i += 2) set_item(dict, items[i], items[i + 1]);
          push(dict);
        } break;
        case 'a': {                                              // APPEND
          auto item = pop();
          append(top(), item);
        } break;
        case 'e': {                                              // APPENDS
          auto items = pop_mark();
          for (auto& item : items) append(top(), item);
        } break;
        case 's': {                                              // SETITEM
          auto value = pop();
          auto key = pop();
          set_item_on(top(), key, value);
        } break;
        case 'u': {                                              // SETITEMS
          auto items = pop_mark();
          for (size_t i = 0; i + 1 < items.size(); i += 2) set_item_on(top(), items[i], items[i + 1]);
        } break;
        case 'q': memo_[byte()] = top(); break;                  // BINPUT
        case 'r': memo_[little<uint32_t>()] = top(); break;      // LONG_BINPUT
        case 0x94: memo_[memo_.size()] = top(); break;           // MEMOIZE
        case 'h': push(memo(byte())); break;                     // BINGET
        case 'j': push(memo(little<uint32_t>())); break;         // LONG_BINGET
        case 'c': {                                              // GLOBAL
          auto module = line();
          push(marker(kGlobal, module + "." + line()));
        } break;
        case 0x93: {                                             // STACK_GLOBAL
          auto name = pop();
          auto module = pop();
          if (!name.isString() || !module.isString()) fail("STACK_GLOBAL without names");
          push(marker(kGlobal, module.toStringRef() + "." + name.toStringRef()));
        } break;
        case 'R': {                                              // REDUCE
          auto args = pop();
          auto callable = pop();
          push(reduce(callable, args));
        } break;
        case 0x81: {                                             // NEWOBJ
          pop();
          auto cls = pop();
          push(marker(kObject, is_marker(cls, kGlobal) ? marker_name(cls) : "?"));
        } break;
        case 'b': {                                              // BUILD
          auto state = pop();
          build(top(), state);
        } break;
        case 'Q': {                                              // BINPERSID
          auto id = pop();
          push(persistent(id));
        } break;
        default:
          // The byte itself is the file's content: its position only.
          fail("an opcode acc does not read at byte " + std::to_string(position_ - 1) + " of data.pkl");
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { malformed(path_, what); }
  uint8_t byte() {
    if (position_ >= pickle_.size()) fail("the pickle ends early");
    return static_cast<uint8_t>(pickle_[position_++]);
  }
  void skip(size_t n) {
    if (pickle_.size() - position_ < n) fail("the pickle ends early");
    position_ += n;
  }
  template <typename T>
  T little() {
    skip(sizeof(T));
    T value;
    std::memcpy(&value, pickle_.data() + position_ - sizeof(T), sizeof(T));
    return value;  // x86 and ARM Linux are little-endian, as pickle is
  }
  double big_endian_double() {
    skip(8);
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = pickle_[position_ - 1 - i];
    double value;
    std::memcpy(&value, bytes, 8);
    return value;
  }
  std::string text(uint64_t size) {
    skip(size);
    return pickle_.substr(position_ - size, size);
  }
  std::string line() {
    const auto end = pickle_.find('\n', position_);
    if (end == std::string::npos) fail("GLOBAL without a newline");
    auto out = pickle_.substr(position_, end - position_);
    position_ = end + 1;
    return out;
  }
  // Python ints of up to 8 bytes (two's complement, little-endian); wider ones are kept as text.
  c10::IValue long_int(uint64_t size) {
    const auto bytes = text(size);
    if (size > 8) return c10::IValue(python_object_marker("int"));
    uint64_t value = 0;
    for (size_t i = 0; i < size; ++i) value |= uint64_t(static_cast<uint8_t>(bytes[i])) << (8 * i);
    if (size > 0 && size < 8 && (static_cast<uint8_t>(bytes[size - 1]) & 0x80)) value |= ~uint64_t(0) << (8 * size);
    return c10::IValue(static_cast<int64_t>(value));
  }
  void push(c10::IValue value) { stack_.push_back(std::move(value)); }
  c10::IValue pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow");
    auto value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }
  c10::IValue& top() {
    if (stack_.empty()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<c10::IValue> pop_mark() {
    if (marks_.empty() || marks_.back() > stack_.size()) fail("no MARK");
    std::vector<c10::IValue> items(std::make_move_iterator(stack_.begin() + marks_.back()),
                                   std::make_move_iterator(stack_.end()));
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  void tuple(size_t n) {
    std::vector<c10::IValue> items(n);
    for (size_t i = n; i-- > 0;) items[i] = pop();
    push(c10::ivalue::Tuple::create(std::move(items)));
  }
  c10::IValue memo(uint64_t index) {
    auto found = memo_.find(index);
    if (found == memo_.end()) fail("a memo entry read before it was written");
    return found->second;
  }
  void append(c10::IValue& list, const c10::IValue& item) {
    if (list.isList()) list.toList().push_back(item);  // else an object's list (opaque): dropped
  }
  void set_item(c10::impl::GenericDict& dict, const c10::IValue& key, const c10::IValue& value) {
    if (!key.isString() && !key.isInt() && !key.isDouble() && !key.isBool() && !key.isNone()) {
      fail("a dict key that is neither a string nor a number");
    }
    dict.insert_or_assign(key, value);
  }
  void set_item_on(c10::IValue& target, const c10::IValue& key, const c10::IValue& value) {
    if (!target.isGenericDict()) return;  // an object's items (opaque): dropped
    auto dict = target.toGenericDict();
    set_item(dict, key, value);
  }
  c10::IValue reduce(const c10::IValue& callable, const c10::IValue& args) {
    if (!is_marker(callable, kGlobal) || !args.isTuple()) return marker(kObject, "?");
    const auto name = marker_name(callable);
    const auto& a = args.toTupleRef().elements();
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || !a[0].isTensor() || !a[1].isInt() || !a[2].isTuple() || !a[3].isTuple()) {
        fail("a tensor with unexpected arguments");
      }
      auto ints = [&](const c10::IValue& tuple) {
        std::vector<int64_t> out;
        for (const auto& item : tuple.toTupleRef().elements()) {
          if (!item.isInt()) fail("a tensor shape that is not integers");
          out.push_back(item.toInt());
        }
        return out;
      };
      const auto sizes = ints(a[2]);
      const auto strides = ints(a[3]);
      const auto& storage = a[0].toTensor();
      int64_t last = a[1].toInt();
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] < 0 || strides[i] < 0) fail("a negative size or stride");
        if (sizes[i] == 0) last = -1;
        if (last >= 0) last += (sizes[i] - 1) * strides[i];
      }
      if (a[1].toInt() < 0 || last >= storage.numel()) fail("a tensor outside its storage");
      return storage.as_strided(sizes, strides, a[1].toInt());
    }
    if (name == "collections.OrderedDict") return python_dict();
    if (name == "_codecs.encode") {  // protocol 2's bytes: latin-1 text of a str
      if (a.empty() || !a[0].isString()) fail("_codecs.encode without text");
      const auto& utf8 = a[0].toStringRef();
      std::string out;
      for (size_t i = 0; i < utf8.size(); ++i) {
        const auto c = static_cast<uint8_t>(utf8[i]);
        if (c < 0x80) {
          out.push_back(static_cast<char>(c));
        } else if ((c & 0xe0) == 0xc0 && i + 1 < utf8.size()) {
          out.push_back(static_cast<char>(((c & 0x1f) << 6) | (static_cast<uint8_t>(utf8[++i]) & 0x3f)));
        } else {
          fail("_codecs.encode of a character outside latin-1");
        }
      }
      return c10::IValue(out);
    }
    if (name == "numpy.dtype" && !a.empty() && a[0].isString()) return marker(kObject, "numpy.dtype", a[0]);
    if (name == "numpy.core.multiarray._reconstruct" || name == "numpy._core.multiarray._reconstruct") {
      return marker(kObject, "numpy.ndarray");
    }
    return marker(kObject, name);
  }
  // ndarray.__setstate__((version, shape, dtype, is_fortran, raw bytes)): a tensor of that dtype.
  void build(c10::IValue& target, const c10::IValue& state) {
    if (!is_marker(target, kObject) || marker_name(target) != "numpy.ndarray" || !state.isTuple()) return;
    const auto& s = state.toTupleRef().elements();
    if (s.size() != 5 || !s[1].isTuple() || !is_marker(s[2], kObject) || !s[4].isString()) return;
    const auto& code_value = s[2].toTupleRef().elements()[2];
    if (!code_value.isString()) return;
    const auto dtype = numpy_dtype(code_value.toStringRef());
    if (!dtype) return;
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (const auto& item : s[1].toTupleRef().elements()) {
      if (!item.isInt() || item.toInt() < 0) fail("a NumPy array with a bad shape");
      shape.push_back(item.toInt());
      numel *= item.toInt();
    }
    const auto& raw = s[4].toStringRef();
    const std::string& code = code_value.toStringRef();
    const size_t element = code == "u4" ? 4 : c10::elementSize(*dtype);
    if (raw.size() != static_cast<size_t>(numel) * element) fail("a NumPy array whose bytes do not fit its shape");
    at::Tensor out;
    if (code == "u4") {
      out = at::empty({numel}, at::kLong);
      auto* data = out.data_ptr<int64_t>();
      for (int64_t i = 0; i < numel; ++i) {
        uint32_t v;
        std::memcpy(&v, raw.data() + 4 * i, 4);
        data[i] = v;
      }
    } else {
      out = at::empty({numel}, *dtype);
      std::memcpy(out.data_ptr(), raw.data(), raw.size());
    }
    target = out.reshape(shape);
  }
  // ('storage', torch.FloatStorage, key, location, numel): the record data/<key>, on the CPU.
  c10::IValue persistent(const c10::IValue& id) {
    if (!id.isTuple()) fail("a persistent id that is not a tuple");
    const auto& t = id.toTupleRef().elements();
    if (t.size() != 5 || !t[0].isString() || t[0].toStringRef() != "storage" || !is_marker(t[1], kGlobal) ||
        !t[2].isString() || !t[4].isInt()) {
      fail("a persistent id that is not a storage");
    }
    const auto dtype = storage_dtype(marker_name(t[1]));
    if (!dtype) fail("a storage of a type acc does not read");
    const auto key = t[2].toStringRef();
    auto found = storages_.find(key);
    if (found != storages_.end()) return found->second;
    auto tensor = storage(key, *dtype, t[4].toInt());
    storages_.emplace(key, tensor);
    return tensor;
  }

  std::string path_;
  const std::string& pickle_;
  size_t position_ = 0;
  std::vector<c10::IValue> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, c10::IValue> memo_;
  std::map<std::string, at::Tensor> storages_;
};

// The zip reader over bytes already in memory (read and verified once).
class BytesReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesReader(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

// Replaces the markers of objects read_torch_save does not know by their public text.
c10::IValue publish(const c10::IValue& value) {
  if (is_marker(value, kObject) || is_marker(value, kGlobal)) return python_object_marker(marker_name(value));
  if (value.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& item : value.toTupleRef().elements()) items.push_back(publish(item));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (value.isList()) {
    auto list = python_list();
    for (const auto& item : value.toListRef()) list.push_back(publish(item));
    return list;
  }
  if (value.isGenericDict()) {
    auto dict = python_dict();
    for (const auto& entry : value.toGenericDict()) dict.insert(entry.key(), publish(entry.value()));
    return dict;
  }
  return value;
}

}  // namespace

c10::impl::GenericDict python_dict() { return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()); }
c10::impl::GenericList python_list() { return c10::impl::GenericList(c10::AnyType::get()); }
std::string python_object_marker(const std::string& qualified_name) { return "<python object " + qualified_name + ">"; }

c10::IValue read_torch_save(const std::string& path) {
  const std::string bytes = read_checkpoint_file(path);
  if (bytes.size() < 4 || bytes.compare(0, 4, "PK\x03\x04") != 0) {
    malformed(path, "not a zip archive; torch.save's legacy format is not supported");
  }
  try {
    auto adapter = std::make_shared<BytesReader>(bytes);
    caffe2::serialize::PyTorchStreamReader zip(adapter);
    if (!zip.hasRecord("data.pkl")) malformed(path, "no data.pkl");
    const auto [pickle_data, pickle_size] = zip.getRecord("data.pkl");
    const std::string pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
    Reader reader(path, pickle);
    reader.storage = [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
      const std::string record = "data/" + key;
      if (!zip.hasRecord(record)) malformed(path, "a tensor's storage record is missing");
      auto [data, size] = zip.getRecord(record);
      const auto element = c10::elementSize(dtype);
      if (numel < 0 || size < static_cast<size_t>(numel) * element) {
        malformed(path, "a tensor's storage record is shorter than the tensor");
      }
      auto tensor = at::empty({static_cast<int64_t>(size / element)}, dtype);
      std::memcpy(tensor.data_ptr(), data.get(), (size / element) * element);
      return tensor;
    };
    return publish(reader.run());
  } catch (const c10::Error&) {
    // libtorch's zip reader quotes record names from the file: not repeated.
    malformed(path, "its zip archive is damaged");
  }
}

void write_torch_save(const c10::IValue& value, const std::string& path) {
  std::vector<char> pickle;
  // tag_aggregates=false: no torch.jit._pickle.restore_type_tag around dicts and lists.
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pickle.insert(pickle.end(), data, data + size); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  caffe2::serialize::PyTorchStreamWriter writer(path);
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  if (!writer.finalized()) throw CheckpointError("acc: could not write '" + path + "'");
}

}  // namespace acc::detail
