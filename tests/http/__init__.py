"""Tests of schedules, webhooks, metrics and child runs."""
