//! A record's text fields in one buffer of its own: copied from the request, not shared with
//! it, so a record waiting in the queue holds a few hundred bytes rather than the connection's
//! read buffer; each field cut at a bound, so the queue's memory is bounded too.

/// The text fields, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Text {
    Method,
    Host,
    Path,
    Query,
    UserAgent,
    Referer,
}

/// The most bytes kept of each field (`Text` order); longer values are cut there.
const LIMITS: [usize; 6] = [32, 256, 4096, 4096, 1024, 1024];

#[derive(Debug, Default)]
pub(crate) struct Texts {
    bytes: Vec<u8>,
    ends: [u32; 6],
}

impl Texts {
    /// The fields' values, in `Text` order (`None`: absent, kept as empty).
    pub(crate) fn new(values: [Option<&[u8]>; 6]) -> Texts {
        let size: usize = values
            .iter()
            .zip(LIMITS)
            .map(|(v, cap)| v.map_or(0, |v| v.len().min(cap)))
            .sum();
        let mut t = Texts {
            bytes: Vec::with_capacity(size),
            ends: [0; 6],
        };
        for (i, (v, cap)) in values.iter().zip(LIMITS).enumerate() {
            if let Some(v) = v {
                t.bytes.extend_from_slice(&v[..v.len().min(cap)]);
            }
            t.ends[i] = u32::try_from(t.bytes.len()).unwrap_or(u32::MAX);
        }
        t
    }

    pub(crate) fn get(&self, which: Text) -> &[u8] {
        let i = which as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.bytes
            .get(start..self.ends[i] as usize)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_and_are_cut_at_their_bounds() {
        let long = vec![b'a'; 5000];
        let t = Texts::new([
            Some(b"GET"),
            None,
            Some(&long),
            Some(b"q=1"),
            Some(b"curl"),
            None,
        ]);
        assert_eq!(t.get(Text::Method), b"GET");
        assert!(t.get(Text::Host).is_empty());
        assert_eq!(t.get(Text::Path).len(), 4096);
        assert_eq!(t.get(Text::Query), b"q=1");
        assert_eq!(t.get(Text::UserAgent), b"curl");
        assert!(t.get(Text::Referer).is_empty());
    }
}
