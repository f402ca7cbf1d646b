package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

type calendarDoc struct {
	ID        string          `bson:"_id"`
	TenantID  string          `bson:"tenantId"`
	Name      string          `bson:"name"`
	Timezone  string          `bson:"timezone"`
	Dates     []string        `bson:"dates,omitempty"`
	Ranges    []calendarRange `bson:"ranges,omitempty"`
	Weekly    []weeklyRule    `bson:"weekly,omitempty"`
	Version   int64           `bson:"version"`
	CreatedAt int64           `bson:"createdAt"`
	UpdatedAt int64           `bson:"updatedAt"`
}

type calendarRange struct {
	From string `bson:"from"`
	To   string `bson:"to"`
}

type weeklyRule struct {
	Days []string `bson:"days"`
	From string   `bson:"from,omitempty"`
	To   string   `bson:"to,omitempty"`
}

func toCalendarDoc(c *model.Calendar) calendarDoc {
	d := calendarDoc{ID: c.ID, TenantID: c.TenantID, Name: c.Name, Timezone: c.Timezone, Dates: c.Dates,
		Version: c.Version, CreatedAt: unixNano(c.CreatedAt), UpdatedAt: unixNano(c.UpdatedAt)}
	for _, r := range c.Ranges {
		d.Ranges = append(d.Ranges, calendarRange(r))
	}
	for _, w := range c.Weekly {
		d.Weekly = append(d.Weekly, weeklyRule(w))
	}
	return d
}

func (d *calendarDoc) model() *model.Calendar {
	c := &model.Calendar{ID: d.ID, TenantID: d.TenantID, Name: d.Name, Timezone: d.Timezone, Dates: d.Dates,
		Version: d.Version, CreatedAt: fromNano(d.CreatedAt), UpdatedAt: fromNano(d.UpdatedAt)}
	for _, r := range d.Ranges {
		c.Ranges = append(c.Ranges, model.CalendarRange(r))
	}
	for _, w := range d.Weekly {
		c.Weekly = append(c.Weekly, model.WeeklyRule(w))
	}
	return c
}

// CalendarCreate inserts c. ErrConflict if the id exists.
func (s *Store) CalendarCreate(ctx context.Context, c *model.Calendar) error {
	if _, err := s.calendars.InsertOne(ctx, toCalendarDoc(c)); err != nil {
		return fmt.Errorf("calendar create %s: %w", c.ID, interpretError(err))
	}
	return nil
}

// CalendarGet returns the tenant's calendar. ErrNotFound.
func (s *Store) CalendarGet(ctx context.Context, tenantID, id string) (*model.Calendar, error) {
	var d calendarDoc
	if err := s.calendars.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}}).Decode(&d); err != nil {
		return nil, fmt.Errorf("calendar get %s: %w", id, interpretError(err))
	}
	return d.model(), nil
}

// CalendarList pages a tenant's calendars by id over the (tenantId, _id)
// index.
func (s *Store) CalendarList(ctx context.Context, p *store.CalendarListParams) ([]*model.Calendar, error) {
	filter := bson.D{{Key: "tenantId", Value: p.TenantID}}
	if p.After != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After}}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(clampLimit(p.Limit))
	docs, err := findAll[calendarDoc](ctx, s.calendars, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("calendar list tenant %s: %w", p.TenantID, err)
	}
	out := make([]*model.Calendar, len(docs))
	for i := range docs {
		out[i] = docs[i].model()
	}
	return out, nil
}

// CalendarUpdate replaces the calendar if its stored version is
// expectedVersion. ErrNotFound, ErrConflict.
func (s *Store) CalendarUpdate(ctx context.Context, c *model.Calendar, expectedVersion int64) error {
	filter := bson.D{{Key: "_id", Value: c.ID}, {Key: "tenantId", Value: c.TenantID}, {Key: "version", Value: expectedVersion}}
	unlock := s.lockCAS(s.calendars, c.ID)
	res, err := s.calendars.ReplaceOne(ctx, filter, toCalendarDoc(c))
	unlock()
	if err == nil && res.MatchedCount == 0 {
		err = s.notFoundOrConflict(ctx, s.calendars, bson.D{{Key: "_id", Value: c.ID}, {Key: "tenantId", Value: c.TenantID}})
	}
	if err != nil {
		return fmt.Errorf("calendar update %s: %w", c.ID, interpretError(err))
	}
	return nil
}

// CalendarDelete removes the tenant's calendar. ErrNotFound.
func (s *Store) CalendarDelete(ctx context.Context, tenantID, id string) error {
	unlock := s.lockCAS(s.calendars, id)
	res, err := s.calendars.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "tenantId", Value: tenantID}})
	unlock()
	if err == nil && res.DeletedCount == 0 {
		err = model.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("calendar delete %s: %w", id, interpretError(err))
	}
	return nil
}

// CalendarCountByTenant counts over the (tenantId, _id) index, stopping
// at max when max > 0.
func (s *Store) CalendarCountByTenant(ctx context.Context, tenantID string, max int) (int, error) {
	n, err := s.calendars.CountDocuments(ctx, bson.D{{Key: "tenantId", Value: tenantID}}, countOpts(max))
	if err != nil {
		return 0, fmt.Errorf("calendar count tenant %s: %w", tenantID, interpretError(err))
	}
	return int(n), nil
}

// ScheduleCountByCalendar counts a tenant's schedules that name
// calendarID, over the (tenantId, excludeCalendars) index.
func (s *Store) ScheduleCountByCalendar(ctx context.Context, tenantID, calendarID string) (int, error) {
	n, err := s.schedules.CountDocuments(ctx, bson.D{{Key: "tenantId", Value: tenantID}, {Key: "excludeCalendars", Value: calendarID}})
	if err != nil {
		return 0, fmt.Errorf("schedule count by calendar %s: %w", calendarID, interpretError(err))
	}
	return int(n), nil
}
