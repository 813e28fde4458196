//! Header maps reused within a worker thread. Every proxied request builds a map of its
//! request head, at two allocations; it comes back here, cleared, once the request has gone
//! out (whichever server read it), as do the maps of the responses the proxy makes itself
//! once its own HTTP/1 server has written them, and the next request takes them. (An
//! origin's answer has no map on that server's path: `origin/fields.rs`.) Responses that
//! hyper's servers write are dropped with their maps.

use std::cell::RefCell;

use http::HeaderMap;

/// Spare maps kept per worker thread: the requests in flight at once on a busy worker.
const KEEP: usize = 256;
/// Larger maps are dropped rather than kept, so one huge head does not pin memory.
const KEEP_CAPACITY_UP_TO: usize = 96;

thread_local! {
    static SPARE: RefCell<Vec<HeaderMap>> = const { RefCell::new(Vec::new()) };
}

/// An empty map with room for `fields` fields.
pub fn take(fields: usize) -> HeaderMap {
    match crate::spares::take(&SPARE) {
        Some(mut map) => {
            // Bounded: heads carry at most 128 fields (the head readers' limit).
            map.reserve(fields);
            map
        }
        None => HeaderMap::with_capacity(fields),
    }
}

/// Hands a map back for another request on this thread.
pub fn give_back(mut map: HeaderMap) {
    if map.capacity() > KEEP_CAPACITY_UP_TO {
        return;
    }
    map.clear();
    crate::spares::keep(&SPARE, map, KEEP);
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HOST;
    use http::HeaderValue;

    #[test]
    fn a_map_comes_back_empty_with_its_room() {
        let mut map = take(8);
        map.insert(HOST, HeaderValue::from_static("a.test"));
        let room = map.capacity();
        give_back(map);
        let again = take(4);
        assert!(again.is_empty());
        assert_eq!(again.capacity(), room);
        // A spare map smaller than asked for grows.
        give_back(again);
        assert!(take(200).capacity() >= 200);
    }

    #[test]
    fn large_maps_are_not_kept() {
        // Drain this thread's spares first.
        while SPARE.with(|s| s.borrow_mut().pop()).is_some() {}
        give_back(HeaderMap::with_capacity(1000));
        assert_eq!(SPARE.with(|s| s.borrow().len()), 0);
    }
}
