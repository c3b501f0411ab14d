#include "bindings/lua_random.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace accel::lua {
namespace {

// The state words are the generator's whole state, saved as they are.
struct Xoshiro256 {
  uint64_t s[4];

  explicit Xoshiro256(uint64_t seed) { reseed(seed); }

  void reseed(uint64_t seed) {
    for (uint64_t& word : s) {  // splitmix64: never all-zero, well mixed
      seed += 0x9E3779B97F4A7C15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      word = z ^ (z >> 31);
    }
  }

  uint64_t next() {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }

  // [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
};

Xoshiro256& generator() {
  static Xoshiro256 g(0);
  return g;
}

double integer_argument(lua_State* L, int index) {
  return std::trunc(luaL_checknumber(L, index));
}

int math_random(lua_State* L) {
  double r = generator().uniform();
  switch (lua_gettop(L)) {
    case 0:
      lua_pushnumber(L, r);
      return 1;
    case 1: {
      double m = integer_argument(L, 1);
      luaL_argcheck(L, 1 <= m, 1, "interval is empty");
      lua_pushnumber(L, std::floor(r * m) + 1);
      return 1;
    }
    case 2: {
      double m = integer_argument(L, 1);
      double n = integer_argument(L, 2);
      luaL_argcheck(L, m <= n, 2, "interval is empty");
      lua_pushnumber(L, std::floor(r * (n - m + 1)) + m);
      return 1;
    }
    default:
      return luaL_error(L, "wrong number of arguments");
  }
}

int math_randomseed(lua_State* L) {
  double seed = luaL_checknumber(L, 1);
  uint64_t key;
  std::memcpy(&key, &seed, sizeof key);  // the number's bits: 0.5 and 1 seed differently
  generator().reseed(key);
  return 0;
}

}  // namespace

void install_math_random(lua_State* L) {
  lua_getglobal(L, "math");
  lua_pushcfunction(L, math_random);
  lua_setfield(L, -2, "random");
  lua_pushcfunction(L, math_randomseed);
  lua_setfield(L, -2, "randomseed");
  lua_pop(L, 1);
}

void reset_math_random() { generator().reseed(0); }

std::vector<Binding> lua_random_bindings() {
  return {
      bind("math_random_state", []() {
        at::Tensor state = at::empty({4}, at::kLong);
        std::memcpy(state.data_ptr(), generator().s, sizeof generator().s);
        return state;
      }),
      bind("set_math_random_state", [](const at::Tensor& state) {
        TORCH_CHECK(state.scalar_type() == at::kLong && state.numel() == 4,
                    "set_math_random_state: expected an int64 tensor of 4 values, got ",
                    state.scalar_type(), " of shape ", state.sizes());
        at::Tensor words = state.contiguous();
        TORCH_CHECK(words.ne(0).any().item<bool>(),
                    "set_math_random_state: an all-zero state would only ever give zeros");
        std::memcpy(generator().s, words.data_ptr(), sizeof generator().s);
      }),
  };
}

}  // namespace accel::lua
