// Capacity: ids are 1..=L bytes; an Id can only be made through Id::new, which checks the length.
use duplex_core::Id;

fn main() {
    let _id: Id = Id { text: Default::default() };
}
