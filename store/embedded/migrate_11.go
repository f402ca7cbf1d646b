package embedded

import bolt "go.etcd.io/bbolt"

// indexScheduleEnds brings layout 11 to 12: bSchedEnds, created empty by
// Open, gets the entries of every stored schedule (writeEndKeys), 10,000
// schedules a transaction. A run cut short writes the same entries again.
func indexScheduleEnds(db *bolt.DB, keys *tokenKey) error {
	return walkChunks(db, bSchedules, 10_000, func(tx *bolt.Tx, rows []kv) error {
		codes, dict := newTenantCodes(tx), &rowDict{tx: tx, tokens: keys}
		for _, r := range rows {
			sc, _, err := decodeScheduleRow([]byte(schedKeyID(r.k)), r.v, dict)
			if err != nil {
				return err
			}
			if err := writeEndKeys(tx, codes, nil, sc); err != nil {
				return err
			}
		}
		return nil
	})
}
