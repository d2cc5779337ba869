//! Column operations for the fixed tables, written so that no index can be
//! out of bounds (the core has no panic paths; `tests/no-panic` proves it at
//! link time).

/// Moves the row at `from` to `len - 1` and rows `from + 1..len` one place
/// towards the front: after `len -= 1`, row `from` is gone and the order of
/// the rest is kept. Does nothing if `from..len` is not a range of
/// `column`.
pub(crate) fn rotate_out<T>(column: &mut [T], from: usize, len: usize) {
    let Some(mut rest) = column.get_mut(from..len) else {
        return;
    };
    // Bubble the first element to the end, one neighbour at a time.
    while let Some((first, tail)) = core::mem::take(&mut rest).split_first_mut() {
        let Some(next) = tail.first_mut() else {
            break;
        };
        core::mem::swap(first, next);
        rest = tail;
    }
}

/// Writes `value` at row `len` and moves it to row `to`, shifting rows
/// `to..len` one place back: the inverse of [`rotate_out`]. Does nothing
/// if `to..=len` is not a range of `column`.
pub(crate) fn rotate_in<T>(column: &mut [T], to: usize, len: usize, value: T) {
    let Some(mut rest) = column.get_mut(to..=len) else {
        return;
    };
    if let Some(last) = rest.last_mut() {
        *last = value;
    }
    // Bubble the last element to the front, one neighbour at a time.
    while let Some((last, head)) = core::mem::take(&mut rest).split_last_mut() {
        let Some(prev) = head.last_mut() else {
            break;
        };
        core::mem::swap(last, prev);
        rest = head;
    }
}

/// Swaps rows `to` and `from` (`to < from`) of `column`; does nothing if
/// either is not a row. The building block of a single-pass, order-keeping
/// compaction.
#[inline]
pub(crate) fn swap_down<T>(column: &mut [T], to: usize, from: usize) {
    if let Some((head, tail)) = column.split_at_mut_checked(from) {
        if let (Some(a), Some(b)) = (head.get_mut(to), tail.first_mut()) {
            core::mem::swap(a, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{rotate_in, rotate_out, swap_down};

    #[test]
    fn rotates_one_row_in_and_keeps_the_order() {
        let mut c = [1, 3, 4, 0, 0];
        rotate_in(&mut c, 1, 3, 2);
        assert_eq!(c, [1, 2, 3, 4, 0]);
        rotate_in(&mut c, 0, 4, 0);
        assert_eq!(c, [0, 1, 2, 3, 4]);
        rotate_in(&mut c, 2, 5, 9); // row 5 is not in the column
        assert_eq!(c, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn swaps_down_only_within_the_column() {
        let mut c = [1, 2, 3];
        swap_down(&mut c, 0, 2);
        assert_eq!(c, [3, 2, 1]);
        swap_down(&mut c, 0, 3); // `from` is not a row
        swap_down(&mut c, 2, 1); // not downwards
        assert_eq!(c, [3, 2, 1]);
    }

    #[test]
    fn rotates_one_row_out_and_keeps_the_order() {
        let mut c = [1, 2, 3, 4, 5, 0, 0];
        rotate_out(&mut c, 1, 5);
        assert_eq!(c, [1, 3, 4, 5, 2, 0, 0]);
        rotate_out(&mut c, 3, 4);
        assert_eq!(c, [1, 3, 4, 5, 2, 0, 0]);
        rotate_out(&mut c, 5, 9); // not a range of the column
        assert_eq!(c, [1, 3, 4, 5, 2, 0, 0]);
    }
}
