// A piece of the text on its way through a tokenizer: what normalization
// left and pre-tokenization cut, before the model turns it into ids. Pieces
// flow from one stage to the next through a PieceSink, one at a time, so a
// long text is never held as a list of millions of words.
#pragma once
#include <string>
#include <type_traits>
#include <utility>

namespace accel::tokenizers {

struct Piece {
  std::string text;
  // The piece begins at the first byte of the text being encoded (the
  // Metaspace pre-tokenizer's prepend_scheme "first" asks).
  bool at_start = false;
  // The ByteLevel pre-tokenizer's byte-to-character mapping is still to be
  // applied (byte_level.h): the model applies it, after looking the raw
  // bytes up in its cache, unless a later stage needs the mapped text.
  bool bytes_unmapped = false;
};

// A non-owning reference to a callable, cheaper than std::function on the
// path every word takes.
template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT: implicit, as a lambda argument
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

using PieceSink = FunctionRef<void(Piece&&)>;

// Maps a pending byte-level piece into the alphabet (a no-op otherwise).
void map_pending_bytes(Piece& piece);

}  // namespace accel::tokenizers
