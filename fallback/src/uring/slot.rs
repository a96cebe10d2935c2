//! The table of operations in flight: `user_data` to the operation's token and payload.
//!
//! `user_data` packs a slot index (low 32 bits) and the slot's generation (bits 32..63). A slot's
//! generation changes every time it is freed, so a completion or cancel that names an older
//! generation can never reach the slot's next occupant. Bit 63 is left clear: the engine's own
//! operations (cancels, timeouts) use it.

/// `user_data` bit marking an operation the engine submitted for itself.
pub(crate) const INTERNAL: u64 = 1 << 63;
const GEN_MASK: u32 = 0x7fff_ffff;

/// Identifies one submitted operation on one ring (its `user_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub(crate) u64);

impl OpId {
    /// An id no operation ever has (it carries the engine's own bit).
    pub(crate) const NONE: OpId = OpId(INTERNAL);

    /// The `user_data` value the operation carries.
    pub fn user_data(self) -> u64 {
        self.0
    }

    fn index(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

#[derive(Debug)]
struct Busy<P> {
    token: u64,
    payload: P,
}

#[derive(Debug)]
struct Slot<P> {
    generation: u32,
    busy: Option<Busy<P>>,
}

/// Slots with a free list; payloads live here until their operation's final completion.
#[derive(Debug)]
pub(crate) struct SlotTable<P> {
    slots: Vec<Slot<P>>,
    free: Vec<u32>,
    busy: usize,
}

impl<P> SlotTable<P> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            busy: 0,
        }
    }

    /// Number of operations in flight.
    pub(crate) fn busy(&self) -> usize {
        self.busy
    }

    /// Stores an operation and returns its id.
    pub(crate) fn insert(&mut self, token: u64, payload: P) -> OpId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    busy: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.busy = Some(Busy { token, payload });
        self.busy += 1;
        OpId((u64::from(slot.generation) << 32) | u64::from(index))
    }

    /// Whether `id` names an operation in flight.
    pub(crate) fn contains(&self, id: OpId) -> bool {
        self.lookup(id).is_some()
    }

    /// The caller's token of a live operation.
    pub(crate) fn token(&self, id: OpId) -> Option<u64> {
        self.lookup(id).map(|b| b.token)
    }

    fn lookup(&self, id: OpId) -> Option<&Busy<P>> {
        if id.0 & INTERNAL != 0 {
            return None;
        }
        let slot = self.slots.get(id.index())?;
        if slot.generation != id.generation() {
            return None;
        }
        slot.busy.as_ref()
    }

    /// Frees the slot of a finished operation and returns its token and payload.
    pub(crate) fn remove(&mut self, id: OpId) -> Option<(u64, P)> {
        self.lookup(id)?;
        let slot = &mut self.slots[id.index()];
        let busy = slot.busy.take()?;
        slot.generation = slot.generation.wrapping_add(1) & GEN_MASK;
        self.free.push(id.index() as u32);
        self.busy -= 1;
        Some((busy.token, busy.payload))
    }

    /// Ids of all operations in flight.
    pub(crate) fn live_ids(&self) -> Vec<OpId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.busy.is_some())
            .map(|(i, s)| OpId((u64::from(s.generation) << 32) | i as u64))
            .collect()
    }

    /// Gives up on all payloads without dropping them (memory the kernel may still write).
    pub(crate) fn leak_all(&mut self) {
        for slot in &mut self.slots {
            if let Some(busy) = slot.busy.take() {
                std::mem::forget(busy);
            }
        }
        self.busy = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_generation_misses_reused_slot() {
        let mut t = SlotTable::new();
        let a = t.insert(1, "a");
        assert_eq!(t.remove(a), Some((1, "a")));
        let b = t.insert(2, "b");
        assert_eq!(a.index(), b.index());
        assert_ne!(a, b);
        assert_eq!(t.remove(a), None);
        assert!(!t.contains(a));
        assert_eq!(t.token(b), Some(2));
        assert_eq!(t.busy(), 1);
        assert_eq!(t.remove(b), Some((2, "b")));
        assert_eq!(t.busy(), 0);
    }

    #[test]
    fn internal_bit_never_matches() {
        let mut t = SlotTable::new();
        let a = t.insert(7, ());
        assert!(!t.contains(OpId(a.0 | INTERNAL)));
        assert_eq!(a.0 & INTERNAL, 0);
    }
}
