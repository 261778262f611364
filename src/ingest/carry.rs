//! What one batch carries to the next: the DCGM devices seen in each hour of the trailing day before the next
//! window, so a window that follows the last one needs no query of its trailing day. Its invariant: what is
//! carried equals what a fresh read of the same hours gives, whichever batches came before and in whatever sizes;
//! a window the carry does not reach reads its trailing day afresh.

use std::collections::{BTreeMap, BTreeSet};

use crate::metering::SeenDevice;

use super::window::HOUR_MS;

/// The hours before a window whose DCGM devices count towards its hours' cards (a trailing day with the hour).
pub const TRAILING_HOURS: i64 = 23;

/// DCGM devices per hour (its start in ms) they were seen in: a sample, finite or not, in `[h, h + 1 h)`.
pub type DevicesByHour = BTreeMap<i64, BTreeSet<SeenDevice>>;

/// The DCGM devices of the trailing day before the next window, as the last window left them.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CarriedDevices {
    hours: DevicesByHour,
    /// `[from, to)` in ms: the hours whose devices are all known (an hour absent from `hours` saw none).
    known: Option<(i64, i64)>,
}

impl CarriedDevices {
    /// Whether the trailing day of a window starting at `start_ms` is known without a query: the last window
    /// ended exactly there and knew the day before its end.
    pub fn reaches(&self, start_ms: i64) -> bool {
        self.known.is_some_and(|(from, to)| to == start_ms && from <= start_ms - TRAILING_HOURS * HOUR_MS)
    }

    /// The devices counted for each hour of a window of consecutive `hours_ms`: those seen in the hour itself
    /// (`own`) or in the 23 hours before it. The hours before the window come from `read` (its trailing day read
    /// with it), else from the carry where it reaches the window; with neither, only the window's own hours
    /// count. The carry is left holding the trailing day of the next window, or nothing where this one's was
    /// not known.
    pub fn window(
        &mut self,
        hours_ms: &[i64],
        read: Option<DevicesByHour>,
        own: DevicesByHour,
    ) -> Vec<Vec<SeenDevice>> {
        let (Some(&first), Some(&last)) = (hours_ms.first(), hours_ms.last()) else { return Vec::new() };
        let reached = read.is_none() && self.reaches(first);
        let known = read.is_some() || reached;
        let mut seen = match read {
            Some(read) => read,
            None if reached => std::mem::take(&mut self.hours),
            None => DevicesByHour::new(),
        };
        // only the hours before the window: what a fresh read of the trailing day answers
        seen.retain(|h, _| *h >= first - TRAILING_HOURS * HOUR_MS && *h < first);
        for (h, devices) in own {
            if h >= first && h <= last {
                seen.entry(h).or_default().extend(devices);
            }
        }
        let out = hours_ms
            .iter()
            .map(|&h| {
                let day: BTreeSet<&SeenDevice> =
                    seen.range(h - TRAILING_HOURS * HOUR_MS..=h).flat_map(|(_, s)| s.iter()).collect();
                day.into_iter().cloned().collect()
            })
            .collect();
        let end = last + HOUR_MS;
        let from = end - TRAILING_HOURS * HOUR_MS;
        *self = match known {
            true => CarriedDevices { hours: seen.split_off(&from), known: Some((from, end)) },
            false => CarriedDevices::default(),
        };
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn dev(host: u8, card: u8) -> SeenDevice {
        SeenDevice { host: format!("n{host}"), uuid: format!("GPU-{host}-{card}") }
    }

    /// Which devices were seen in which hour (0-based): the truth both readings are made from.
    fn presence(bits: &[u16], hours: i64) -> DevicesByHour {
        let mut out = DevicesByHour::new();
        for h in 0..hours {
            let b = bits[h as usize % bits.len()].rotate_left(h as u32 % 7);
            for i in 0..12u8 {
                if b & (1 << i) != 0 {
                    out.entry(h * HOUR_MS).or_default().insert(dev(i / 4, i % 4));
                }
            }
        }
        out
    }

    fn between(p: &DevicesByHour, from: i64, to: i64) -> DevicesByHour {
        p.range(from * HOUR_MS..to * HOUR_MS).map(|(h, s)| (*h, s.clone())).collect()
    }

    /// A fresh read of hour `h`: the devices of `[h − 23 h, h]`.
    fn fresh(p: &DevicesByHour, h: i64) -> Vec<SeenDevice> {
        let day: BTreeSet<&SeenDevice> =
            p.range((h - TRAILING_HOURS) * HOUR_MS..=h * HOUR_MS).flat_map(|(_, s)| s.iter()).collect();
        day.into_iter().cloned().collect()
    }

    #[test]
    fn a_window_not_following_the_last_is_not_reached() {
        let p = presence(&[0b1111, 0b0011], 60);
        let mut carry = CarriedDevices::default();
        let hours: Vec<i64> = (24..30).map(|h| h * HOUR_MS).collect();
        let _ = carry.window(&hours, Some(between(&p, 1, 24)), between(&p, 24, 30));
        assert!(carry.reaches(30 * HOUR_MS));
        assert!(!carry.reaches(31 * HOUR_MS) && !carry.reaches(29 * HOUR_MS));
        // a window read without its trailing day and not reached knows nothing to carry on
        let hours: Vec<i64> = (40..42).map(|h| h * HOUR_MS).collect();
        let _ = carry.window(&hours, None, between(&p, 40, 42));
        assert!(!carry.reaches(42 * HOUR_MS));
    }

    proptest! {
        /// Carrying across batches of random sizes (each batch reading its own hours, only the first and those
        /// the carry does not reach reading their trailing day) gives, hour by hour, the device sets a fresh
        /// read of each hour's trailing day gives.
        #[test]
        fn carried_devices_equal_fresh_reads(
            bits in prop::collection::vec(any::<u16>(), 1..40),
            sizes in prop::collection::vec(1i64..60, 1..12),
            skips in prop::collection::vec(0i64..3, 12),
            start in 0i64..48,
        ) {
            let total: i64 = sizes.iter().sum::<i64>() + skips.iter().sum::<i64>() + start + 1;
            let p = presence(&bits, total);
            let mut carry = CarriedDevices::default();
            let mut h0 = start;
            for (i, size) in sizes.iter().enumerate() {
                // now and then a gap between batches (another worker took those hours)
                h0 += skips[i];
                let hours: Vec<i64> = (h0..h0 + size).map(|h| h * HOUR_MS).collect();
                let read = (!carry.reaches(h0 * HOUR_MS)).then(|| between(&p, h0 - TRAILING_HOURS, h0));
                let got = carry.window(&hours, read, between(&p, h0, h0 + size));
                for (k, devices) in got.iter().enumerate() {
                    prop_assert_eq!(devices, &fresh(&p, h0 + k as i64), "hour {}", h0 + k as i64);
                }
                h0 += size;
            }
        }
    }
}
