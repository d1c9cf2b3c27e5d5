"""What the checks share: the registry, outcomes, comparisons, and one helper each for cache, dynamo, export
and generation."""
