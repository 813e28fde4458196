//! Values kept for reuse within a worker thread (header maps, span lists): a request takes
//! one that an earlier request gave back instead of allocating, so the request path does not
//! allocate once the worker is warm.

use std::cell::RefCell;
use std::thread::LocalKey;

/// A thread's spare values.
pub type Spares<T> = LocalKey<RefCell<Vec<T>>>;

/// A spare value, if this thread has one.
pub fn take<T: 'static>(spares: &'static Spares<T>) -> Option<T> {
    spares.try_with(|s| s.borrow_mut().pop()).ok().flatten()
}

/// Keeps `value` for another request on this thread, unless `up_to` are kept already.
pub fn keep<T: 'static>(spares: &'static Spares<T>, value: T, up_to: usize) {
    let _ = spares.try_with(|s| {
        let mut spare = s.borrow_mut();
        if spare.len() < up_to {
            spare.push(value);
        }
    });
}
