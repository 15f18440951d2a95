//! The process's allocator: mimalloc, asked the way a C program asks it.
//!
//! The gateway allocates many small, short-lived buffers and futures per call, and a
//! thread-caching allocator makes that measurably cheaper than glibc malloc. The `mimalloc`
//! crate's `GlobalAlloc` passes every request to `mi_malloc_aligned`, whatever its alignment.
//! In mimalloc v3 that call takes its fast path only for blocks up to 1 KiB; a larger block
//! goes to the generic path, which over-allocates and hands out an interior pointer unless the
//! size is a power of two (bench/instructions.md: about 14 such allocations a call, ~200
//! instructions each, and each free then has to find the block's start again).
//!
//! `malloc` already returns memory aligned to 16 bytes (`MIN_ALIGN`, max_align_t), so a request
//! whose alignment is at most that, and at most its size, is a plain `mi_malloc` — the rule
//! Rust's own `System` allocator follows with libc. Larger alignments (tokio's task cells, 128
//! bytes) still go to the aligned entry points.

use std::{
    alloc::{GlobalAlloc, Layout},
    ffi::c_void,
};

use libmimalloc_sys as mi;

/// The alignment every `mi_malloc` block of at least this size has (mimalloc's
/// `MI_MAX_ALIGN_SIZE` on 64-bit targets).
const MIN_ALIGN: usize = 16;

/// mimalloc as the global allocator (see the module docs).
pub struct MiMalloc;

/// Whether `mi_malloc(size)` alone satisfies `align`.
#[inline]
fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

/// One block for `layout` from `plain_call` when [`plain`] allows it, else from `aligned_call`
/// (the zeroing and non-zeroing pairs of mimalloc's entry points).
///
/// # Safety
/// Both must be mimalloc's allocation entry points, taking a size (and an alignment).
#[inline]
unsafe fn allocate(
    layout: Layout,
    plain_call: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_call: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: the caller passes mimalloc's entry points; they take any size and alignment.
    unsafe {
        if plain(layout.align(), layout.size()) {
            plain_call(layout.size()).cast()
        } else {
            aligned_call(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every pointer handed out comes from mimalloc and is freed or resized by mimalloc,
// which accepts a block from any of its entry points in `mi_free` and `mi_realloc`; each
// block satisfies its layout's alignment (by `plain`'s rule or by the aligned call).
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain FFI calls; mimalloc returns null on failure, as GlobalAlloc expects.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (GlobalAlloc's contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc's contract);
        // `mi_realloc` keeps the block or copies it into one that `plain` says is aligned.
        unsafe {
            if plain(layout.align(), new_size) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

// `mi_collect` is declared by libmimalloc-sys only under its `extended` feature (which brings
// in another crate); the symbol is in the mimalloc library that crate links either way.
unsafe extern "C" {
    fn mi_collect(force: bool);
}

/// Hands memory freed on this thread back to the system now, rather than keeping it for
/// reuse: called on the thread that has just dropped a large transient structure (a parsed
/// OpenAPI document, a catalogue's parsed lists, a replaced snapshot). mimalloc keeps freed
/// pages for a while and a thread's freed pages until that thread allocates again; a blocking
/// pool thread that parsed a 20 MB document may not, so without this the process keeps the
/// parse's peak as its resident size (GitHub's REST document: 126 MiB resident when ready
/// instead of 87 MiB). Costs a walk of this thread's heap: for rare events only.
pub fn release_freed() {
    // SAFETY: a plain FFI call with no arguments to check; mimalloc is linked in every build
    // (it is the global allocator of the binary, and harmless to collect where it is not).
    unsafe { mi_collect(true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocates, writes, grows and frees blocks of many sizes and alignments, checking each
    /// block's alignment and that a resize keeps its contents.
    #[test]
    fn every_block_has_its_alignment_and_keeps_its_contents() {
        let allocator = MiMalloc;
        for align in [1, 2, 8, 16, 32, 128, 4096] {
            for size in [1, 7, 8, 15, 16, 24, 100, 1000, 1100, 1500, 5000, 70_000] {
                let layout = Layout::from_size_align(size, align).expect("layout");
                for zeroed in [false, true] {
                    // SAFETY: a non-zero-size layout; the block is used within its size and
                    // freed once, with the layout it was resized to.
                    unsafe {
                        let p = if zeroed { allocator.alloc_zeroed(layout) } else { allocator.alloc(layout) };
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "size {size} align {align}");
                        if zeroed {
                            assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                        }
                        for i in 0..size {
                            *p.add(i) = (i % 251) as u8;
                        }
                        let grown = allocator.realloc(p, layout, size * 3);
                        assert!(!grown.is_null());
                        assert_eq!(grown as usize % align, 0, "grown: size {size} align {align}");
                        assert!((0..size).all(|i| *grown.add(i) == (i % 251) as u8));
                        let shrunk = allocator.realloc(
                            grown,
                            Layout::from_size_align(size * 3, align).expect("layout"),
                            size.div_ceil(2),
                        );
                        assert_eq!(shrunk as usize % align, 0, "shrunk: size {size} align {align}");
                        assert!((0..size.div_ceil(2)).all(|i| *shrunk.add(i) == (i % 251) as u8));
                        allocator.dealloc(
                            shrunk,
                            Layout::from_size_align(size.div_ceil(2), align).expect("layout"),
                        );
                    }
                }
            }
        }
    }
}
