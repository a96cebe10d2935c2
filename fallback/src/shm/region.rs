//! Regions registered for emulated one-sided access, looked up by key at the target.

use super::error::AccessError;

/// Names a registered region. Keys are not reused while the endpoint lives: a stale key is
/// refused rather than reaching a newer region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionKey(pub u32);

/// The regions of one endpoint.
#[derive(Debug, Default)]
pub(crate) struct Regions {
    slots: Vec<Option<(u32, Vec<u8>)>>,
    next_key: u32,
}

impl Regions {
    pub(crate) fn new(first_key: u32) -> Regions {
        Regions {
            slots: Vec::new(),
            next_key: first_key | 1,
        }
    }

    pub(crate) fn register(&mut self, mem: Vec<u8>) -> RegionKey {
        let key = self.next_key;
        self.next_key = self.next_key.wrapping_add(2) | 1;
        match self.slots.iter_mut().find(|s| s.is_none()) {
            Some(slot) => *slot = Some((key, mem)),
            None => self.slots.push(Some((key, mem))),
        }
        RegionKey(key)
    }

    fn find(&self, key: RegionKey) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| matches!(s, Some((k, _)) if *k == key.0))
    }

    pub(crate) fn deregister(&mut self, key: RegionKey) -> Option<Vec<u8>> {
        let i = self.find(key)?;
        self.slots[i].take().map(|(_, m)| m)
    }

    pub(crate) fn get(&self, key: RegionKey) -> Option<&[u8]> {
        self.find(key)
            .and_then(|i| self.slots[i].as_ref())
            .map(|(_, m)| m.as_slice())
    }

    pub(crate) fn get_mut(&mut self, key: RegionKey) -> Option<&mut [u8]> {
        let i = self.find(key)?;
        self.slots[i].as_mut().map(|(_, m)| m.as_mut_slice())
    }

    /// The bytes `offset..offset + len` of region `key`, checked for key and bounds.
    pub(crate) fn range(
        &self,
        key: RegionKey,
        offset: u64,
        len: usize,
    ) -> Result<&[u8], AccessError> {
        let mem = self.get(key).ok_or(AccessError::BadKey)?;
        let r = checked_range(mem.len(), offset, len)?;
        Ok(&mem[r])
    }

    /// Mutable form of [`Regions::range`].
    pub(crate) fn range_mut(
        &mut self,
        key: RegionKey,
        offset: u64,
        len: usize,
    ) -> Result<&mut [u8], AccessError> {
        let mem = self.get_mut(key).ok_or(AccessError::BadKey)?;
        let r = checked_range(mem.len(), offset, len)?;
        Ok(&mut mem[r])
    }
}

fn checked_range(
    size: usize,
    offset: u64,
    len: usize,
) -> Result<std::ops::Range<usize>, AccessError> {
    let start = usize::try_from(offset).map_err(|_| AccessError::OutOfBounds)?;
    let end = start.checked_add(len).ok_or(AccessError::OutOfBounds)?;
    if end > size {
        return Err(AccessError::OutOfBounds);
    }
    Ok(start..end)
}
