// The C interface of libaccel_sentencepiece.so, the module that holds
// Debian's libsentencepiece (engine/tokenizers/sentencepiece_library.h says
// why it is a module of its own). Plain C types only, and no memory changes
// hands: results reach the caller through its callbacks, errors as text in
// its buffer. Every function catches what SentencePiece throws.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*accel_spm_ids_sink)(void* context, const int* ids, size_t count);
typedef void (*accel_spm_text_sink)(void* context, const char* text, size_t size);

// A processor for the serialized model `data`, or NULL with `error` set.
void* accel_spm_load(const char* data, size_t size, char* error, size_t error_size);
void accel_spm_free(void* processor);

// 0 on success, else -1 with `error` set.
int accel_spm_encode(void* processor, const char* text, size_t size, accel_spm_ids_sink sink, void* context,
                     char* error, size_t error_size);
int accel_spm_decode(void* processor, const int* ids, size_t count, accel_spm_text_sink sink, void* context,
                     char* error, size_t error_size);

int accel_spm_piece_count(void* processor);
// Piece `id` (0 <= id < piece_count) and its kind: 0 normal, 1 unknown,
// 2 control, 3 unused, 4 byte.
void accel_spm_piece(void* processor, int id, accel_spm_text_sink sink, void* context);
int accel_spm_piece_kind(void* processor, int id);
// -1 when absent.
int accel_spm_piece_to_id(void* processor, const char* piece, size_t size);
// 0 unk, 1 bos, 2 eos, 3 pad: its id, or -1 when the model has none.
int accel_spm_special_id(void* processor, int which);

#ifdef __cplusplus
}
#endif
